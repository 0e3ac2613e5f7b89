"""Every event of a served lab, called over its own HTTP API as a page would call it: the list comes from the
app's /config (its components and dependencies), so a security test covers every view and every handler,
including ones added later, instead of a hand-picked few. `sweep` calls each dependency with inputs chosen
by the component's kind and label (`choose`), and returns what each answered."""
from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Optional

import httpx

Chooser = Callable[[dict[str, Any]], Any]


def read_config(base: str, client: Optional[httpx.Client] = None) -> dict[str, Any]:
    return (client or httpx).get(base.rstrip("/") + "/config", timeout=60).json()


def label(component: dict[str, Any]) -> str:
    return str((component.get("props") or {}).get("label") or "").lower()


def default_value(component: dict[str, Any]) -> Any:
    """What the page holds in the component before anyone types (None for states and files)."""
    if component["type"] in ("state", "file"):
        return None
    return (component.get("props") or {}).get("value")


def call(base: str, dependency: dict[str, Any], data: list[Any], client: httpx.Client,
         timeout: float = 120.0, session: Optional[str] = None) -> dict[str, Any]:
    """Run one dependency through the queue (as the page does) and return its last message: `output` on
    success, `success: False` and a `title`/`output.error` when it failed. `session`: the page's session
    (a new one when None); the choices a load event gave a dropdown hold for its session only."""
    base, session = base.rstrip("/"), session or uuid.uuid4().hex[:12]
    trigger = dependency["targets"][0][0] if dependency.get("targets") else None
    joined = client.post(base + "/gradio_api/queue/join", timeout=timeout,
                         json={"data": data, "fn_index": dependency["id"], "trigger_id": trigger,
                               "session_hash": session, "event_data": None})
    if joined.status_code != 200:
        return {"msg": "refused", "status": joined.status_code, "text": joined.text[:500]}
    last: dict[str, Any] = {}
    with client.stream("GET", base + "/gradio_api/queue/data", params={"session_hash": session},
                       timeout=timeout) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            last = json.loads(line[5:])
            if last.get("msg") in ("process_completed", "close_stream", "unexpected_error"):
                break
    return last


def sweep(base: str, choose: Chooser, client: httpx.Client, skip: Callable[[dict[str, Any]], bool] = lambda d: False
          ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Call every dependency of the app once, each input filled by `choose(component)`; [(dependency, last
    message)]."""
    config = read_config(base, client)
    components = {c["id"]: c for c in config["components"]}
    answers = []
    for dependency in config["dependencies"]:
        if not dependency.get("backend_fn") or skip(dependency):
            continue
        data = [choose(components[i]) if i in components else None for i in dependency["inputs"]]
        answers.append((dependency, call(base, dependency, data, client)))
    return answers
