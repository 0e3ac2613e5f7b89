"""The one kind of field that names where a run's model requests go: an endpoint picker.

From the web the owner's endpoints are the choices (simulator.endpoints: `default` is OPENAI_BASE_URL with
OPENAI_API_KEY, the rest come from --endpoint / --endpoints-file); the page never shows their URLs or key
variables, and no field names an environment variable. Only when the owner allowed free URLs
(--allow-free-urls), or for a lab that is not serving the web (tests building the app in-process, the
command line's Access), is the field a text box that also takes a URL; a typed URL then gets no key.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from simulator.access import current_access
from simulator.endpoints import DEFAULT_ENDPOINT


def endpoint_field(label: str, elem_id: Optional[str] = None, **kw: Any) -> Any:
    """A Dropdown of the owner's endpoint names (value `default`), or a Textbox when URLs are allowed."""
    access = current_access()
    names = access.endpoint_names()
    if access.urls_allowed:
        return gr.Textbox("", label=label, elem_id=elem_id, placeholder=f"{DEFAULT_ENDPOINT} (or a URL)",
                          info=f"an endpoint ({', '.join(names)}) or a URL; empty: {DEFAULT_ENDPOINT}"
                          + (" (a typed URL gets no key)" if access.from_web else ""), **kw)
    return gr.Dropdown(names, value=DEFAULT_ENDPOINT, label=label, elem_id=elem_id,
                       info="one of the endpoints the lab's owner set up", **kw)
