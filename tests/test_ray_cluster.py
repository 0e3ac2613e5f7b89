"""The test cluster of Ray nodes on this machine (testkit.cluster.ray_nodes, the `ray_cluster` fixture): two
raylets Ray lists as two alive nodes, each told apart by its own custom resource; kill -9 of one's raylet makes
Ray list that node dead, and a raylet started again under the same name joins as a new node."""
from __future__ import annotations

import pytest

from testkit.cluster.ray_nodes import HEAD


@pytest.mark.slow
def test_two_raylets_are_two_nodes_and_one_killed_comes_back_as_a_new_one(ray_cluster):
    head, other = ray_cluster.node_id(HEAD), ray_cluster.node_id("lab_node_b")
    assert head and other and head != other
    assert (ray_cluster.name_of(head), ray_cluster.name_of(other)) == (HEAD, "lab_node_b")
    assert ray_cluster.raylet_pid(HEAD) != ray_cluster.raylet_pid("lab_node_b")
    ray_cluster.kill_raylet("lab_node_b")
    ray_cluster.wait_node_dead("lab_node_b")
    assert ray_cluster.node_id("lab_node_b") == "" and ray_cluster.node_id(HEAD) == head
    again = ray_cluster.add_node("lab_node_b")
    assert again not in ("", other) and ray_cluster.name_of(again) == "lab_node_b"
