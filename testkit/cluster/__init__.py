"""Test clusters on this one machine: Ray nodes (ray_nodes)."""
