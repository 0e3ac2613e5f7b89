"""Persona specs: the one place that turns a name for some personas into profiles.

    builtin | builtin:train | builtin:heldout   the built-in library (simulator.personas.builtin), all or one split
    builtin:adversarial                         the robustness set: curt, sarcastic, help-rejecting, topic-switching
                                                and agent-testing users (not part of `builtin`)
    file:PATH                                   a profiles file the importer reads (lab or RLVER/SAGE JSONL), or a
                                                SAGE *_result.jsonl (the profiles its dialogues were played with);
                                                a bare PATH to an existing file works too
    ID | ID,ID,... | [ID, ...]                  personas by id: the store's (when one is given), else the built-in one
    set:NAME                                    a stored persona set (simulator.personas.sets), its members
                                                in order; also as an item of a list of ids. Without a store the
                                                lab's default store is read

The trainer, the benchmark, the rollout / chat / probe commands and the app all resolve personas here, so a
spec means the same everywhere and a bad one gets the same message: the spec and what is available. Besides
the built-in PERSONA_SETS, the store holds named sets (`set:NAME`).

What a run used is recorded with `spec_record`: the spec, the set name, how many profiles and `members_hash`,
the hash of the profiles' fingerprints in order, so a set whose members changed gives another hash.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

from simulator.access import Access, AccessError, current_access, register_kind
from simulator.personas.profile import Profile, members_hash
from simulator.personas.sets import PersonaSpecError, set_names, set_profiles

BUILTIN_SETS: dict[str, Optional[str]] = {"builtin": None, "builtin:train": "train", "builtin:heldout": "heldout",
                                           "builtin:adversarial": "adversarial"}
PERSONA_SETS: tuple[str, ...] = tuple(BUILTIN_SETS)
FILE_PREFIX = "file:"
SET_PREFIX = "set:"
MAX_LISTED_PROBLEMS = 20

Spec = Union[str, Sequence[str]]


def resolve_personas(spec: Spec, store: Any = None) -> list[Profile]:
    """The profiles `spec` names, in its order (see the module docstring). `store` is the store, whose
    profiles take precedence over the built-in ones for ids. Raises PersonaSpecError."""
    from simulator.personas.builtin import builtin_profiles

    if isinstance(spec, str):
        text = spec.strip()
        if text in BUILTIN_SETS:
            return builtin_profiles(BUILTIN_SETS[text])
        if text.startswith(FILE_PREFIX):
            return profiles_from_file(text[len(FILE_PREFIX):])
        if text.startswith(SET_PREFIX):
            return stored_set_profiles(text[len(SET_PREFIX):], store)
        if text and _looks_like_path(text):
            allowed_file(text)  # from the web a path outside the lab's folders is refused before it is looked at
        if text and Path(text).expanduser().is_file():
            return profiles_from_file(text)
        ids = [i.strip() for i in text.split(",") if i.strip()]
    else:
        ids = list(spec)
        if any(isinstance(i, str) and i.strip().startswith(SET_PREFIX) for i in ids):
            return [p for item in ids for p in resolve_personas(item if set_name(item) else [item], store)]
    if not ids or not all(isinstance(i, str) and i.strip() for i in ids):
        raise PersonaSpecError(f"persona spec {spec!r} names no personas; {available(store)}")
    found = _by_id(ids, store)
    missing = [i for i in dict.fromkeys(ids) if i not in found]
    if not missing:
        return [found[i] for i in ids]
    if isinstance(spec, str) and _looks_like_path(spec.strip()):
        raise PersonaSpecError(f"profiles file {str(Path(spec.strip()).expanduser())!r} not found; "
                               f"{available(store)}")
    if isinstance(spec, str) and len(ids) == 1:
        raise PersonaSpecError(f"unknown persona set {spec.strip()!r}: no set, file or persona id has that name; "
                               f"{available(store)}")
    raise PersonaSpecError(f"unknown persona id(s): {', '.join(missing)}; {available(store)}")


def spec_error(spec: Any, check_paths: bool = True) -> str:
    """Why `spec` cannot name personas, checked without a store ('' when it can). A list holds ids, which
    may be the store's: only its shape is checked here; a text must be a set, a file or built-in id(s)."""
    from simulator.personas.builtin import is_builtin_id

    if isinstance(spec, list):
        if not spec or not all(isinstance(i, str) and i.strip() for i in spec):
            return "a list of persona ids must be non-empty and hold only ids"
        return ""
    if not isinstance(spec, str):
        return f"must be a persona set, file:PATH or a list of persona ids, got {type(spec).__name__}"
    text = spec.strip()
    if text in BUILTIN_SETS:
        return ""
    if text.startswith(SET_PREFIX):  # a stored set: its name is checked when the run opens the store
        return "" if text[len(SET_PREFIX):].strip() else "set: needs a set name, e.g. set:my-personas"
    if text.startswith(FILE_PREFIX):
        try:
            path = allowed_file(text[len(FILE_PREFIX):])
        except PersonaSpecError as exc:
            return str(exc)
        return f"profiles file {str(path)!r} not found" if check_paths and not path.is_file() else ""
    ids = [i.strip() for i in text.split(",") if i.strip()]
    if ids and all(is_builtin_id(i) for i in ids):
        return ""
    return f"unknown persona set {spec!r}; one of {', '.join(PERSONA_SETS)}, file:PATH, set:NAME, built-in persona " \
           "ids, or a list of persona ids"


def available(store: Any = None) -> str:
    """What a spec can name, for error messages."""
    from simulator.personas.builtin import BUILTIN_IDS

    ids = f"{len(BUILTIN_IDS)} built-in ({BUILTIN_IDS[0]} ... {BUILTIN_IDS[-1]})"
    if store is not None:
        from simulator.personas.store import count_profiles

        ids += f", {count_profiles(store)} in the store"
        names = set_names(store)
        ids += f"; stored sets: {', '.join(SET_PREFIX + n for n in names[:10])}" + (" ..." if len(names) > 10 else "") \
            if names else "; no stored sets"
    return (f"a spec is one of {', '.join(PERSONA_SETS)}, file:PATH, set:NAME (a stored set), or persona ids: {ids}; "
            "`python -m simulator personas list` and `personas sets list` show them")


def stored_set_profiles(name: str, store: Any = None) -> list[Profile]:
    """The current profiles of the stored set `name`, in order (the lab's default store when none is given).
    PersonaSpecError when there is no such set or a member was deleted since."""
    if store is None:
        from storage import make_store

        store = make_store()
    return set_profiles(store, name.strip())


def set_name(spec: Any) -> str:
    """The stored set a spec names ("" when it names none)."""
    text = spec.strip() if isinstance(spec, str) else ""
    return text[len(SET_PREFIX):].strip() if text.startswith(SET_PREFIX) else ""


def spec_record(spec: Spec, profiles: Sequence[Profile]) -> dict[str, Any]:
    """What a run records about its personas: the spec, the stored set it names ("" for none), how many
    profiles and their members_hash (the set's content hash for `set:NAME`)."""
    return {"spec": spec if isinstance(spec, str) else list(spec), "set": set_name(spec), "n": len(profiles),
            "hash": members_hash(profiles)}


def profiles_from_file(path_text: str) -> list[Profile]:
    """Every profile of a file (lab or RLVER/SAGE JSONL, or a SAGE transcript file). An unreadable, empty or
    malformed file raises PersonaSpecError listing its problems by line."""
    from simulator.personas.io import BadFileError, import_profiles
    from simulator.personas.transcript_files import is_transcript_file, profiles_from_transcripts

    path = allowed_file(path_text)
    if not path.is_file():
        raise PersonaSpecError(f"profiles file {str(path)!r} not found; {available()}")
    if is_transcript_file(path):
        try:
            return profiles_from_transcripts(path)
        except BadFileError as e:
            raise PersonaSpecError(f"{path}: {e}") from None
    report = import_profiles(path)
    if report.errors:
        shown = "\n  ".join(str(e) for e in report.errors[:MAX_LISTED_PROBLEMS])
        more = len(report.errors) - MAX_LISTED_PROBLEMS
        raise PersonaSpecError(f"{path} has {len(report.errors)} problem(s):\n  {shown}"
                               + (f"\n  ... and {more} more" if more > 0 else ""))
    if not report.profiles:
        raise PersonaSpecError(f"{path} holds no profiles")
    return report.profiles


def _by_id(ids: Sequence[str], store: Any) -> dict[str, Profile]:
    """id -> profile for the ids found: the store's first, then (a copy of) the built-in library's."""
    from simulator.personas.builtin import get_builtin, is_builtin_id

    found: dict[str, Profile] = {}
    if store is not None:
        from simulator.personas.store import get_profile

        for pid in dict.fromkeys(ids):
            profile = get_profile(store, pid)
            if profile is not None:
                found[pid] = profile
    for pid in dict.fromkeys(ids):
        if pid not in found and is_builtin_id(pid):
            found[pid] = get_builtin(pid)
    return found


def allowed_file(text: str) -> Path:
    """The path of a profiles file the caller may name (simulator.access); PersonaSpecError when it may not,
    the same message whether the file exists or not."""
    try:
        return current_access().path("persona_set", text)
    except AccessError as exc:
        raise PersonaSpecError(f"profiles file: {exc.message}") from None


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith((".jsonl", ".json"))


def spec_choices(store: Any) -> list[str]:
    """The persona specs a view offers: the built-in sets, then set:NAME for every stored set."""
    return list(PERSONA_SETS) + [SET_PREFIX + n for n in set_names(store)]


def _personas_refusal(access: Access, name: str, value: object) -> str:
    """Why the caller may not name the profiles file of persona spec `value` (file:PATH or a bare path)."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    target = text[len(FILE_PREFIX):] if text.startswith(FILE_PREFIX) else text if _looks_like_path(text) else ""
    return access.path_error(name, target) if target.strip() else ""


register_kind("personas", _personas_refusal)
