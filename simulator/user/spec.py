"""SimulatorSpec: how a run names its simulated user, parsed and validated in one place.

A spec string (`offline`, `offline:v2`, `openai:MODEL`, `replay:FILE`, `python:MODULE:FACTORY`) plus what
goes with it: the endpoint's base URL, the prompt pack (`own`, `own:json`, `sage:DIR`, `rlver:DIR`, `v1`),
the emotion rules, the simulator model's sampling and the endpoint's traffic limits. Training, the
benchmark, `trainer rollout`, the chat CLI and the live view all build their simulated users through
`SimulatorSpec.factory()`, so every entry point accepts the same specs. Options a backend has no use for
(a base URL for `offline`) are ignored, as `make_backend` does. Outside code (`python:`) and the files and
folders a spec names (`replay:FILE`, `sage:DIR`, `rlver:DIR`) are checked by the caller's Access
(simulator.access) in `errors()` and again in `factory()`, before anything is imported or read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from simulator.access import Access, current_access, register_kind
from simulator.llm.traffic import TrafficLimits
from simulator.personas.profile import Profile
from simulator.user.agent import SentientAgent, SimulatorFactory
from simulator.user.backends import make_backend, read_spec, spec_error
from simulator.user.packs import load_pack, pack_error
from simulator.user.rules import EmotionRules, get_rules


@dataclass(frozen=True)
class SimulatorSpec:
    spec: str = "offline"
    base_url: str = ""  # an openai: simulator's endpoint: an owner's endpoint name or a URL (simulator.endpoints)
    pack: str = "own"
    rules: Any = "rlver-hard"  # a preset name of simulator.user.rules.RULE_SETS or an EmotionRules
    temperature: Optional[float] = None  # the simulator model's sampling (None: the backend's default)
    max_tokens: Optional[int] = None
    traffic: Optional[TrafficLimits] = None  # None: the backend's defaults
    seed: int = 0
    api_key: Optional[str] = field(default=None, repr=False)  # command line only, else OPENAI_API_KEY; never recorded
    access: Optional[Access] = None  # who asks (None: this process's caller, simulator.access)
    calibration: str = ""  # a fitted map of the judged changes onto people's scale, by name (simulator.user.calibration)

    @classmethod
    def from_config(cls, config: Any, rules: Any = None) -> "SimulatorSpec":
        """The spec a run config names with its `simulator*` and `prompt_pack` fields (TrainConfig,
        BenchmarkConfig); `rules` overrides the config's `simulator_preset`."""
        return cls(spec=config.simulator, base_url=config.simulator_base_url or "", pack=config.prompt_pack,
                   rules=rules if rules is not None else getattr(config, "simulator_preset", "rlver-hard"),
                   temperature=config.simulator_temperature, max_tokens=config.simulator_max_tokens,
                   traffic=TrafficLimits.from_config(config, "simulator_"), seed=config.seed,
                   calibration=getattr(config, "calibration", "") or "")

    @property
    def kind(self) -> str:
        """offline | openai | replay | python ('' for a spec that is none of them)."""
        return read_spec(self.spec if isinstance(self.spec, str) else "")[0]

    def access_errors(self, prefix: str = "simulator") -> dict[str, str]:
        """{field: problem} for the outside code and the paths the caller may not use (simulator.access)."""
        access, e = self.access or current_access(), {}
        kind, target = read_spec(self.spec if isinstance(self.spec, str) else "")
        if kind == "python" and (problem := access.code_error(prefix, self.spec.strip())):
            e[prefix] = problem
        elif kind == "replay" and target and (problem := access.path_error(prefix, target)):
            e[prefix] = problem
        if kind == "openai" and (problem := access.endpoint_error(prefix + "_base_url", self.base_url)):
            e[prefix + "_base_url"] = problem
        pack_kind, _, folder = self.pack.partition(":") if isinstance(self.pack, str) else ("", "", "")
        if pack_kind in ("sage", "rlver") and folder.strip() and (problem := access.path_error("prompt_pack", folder)):
            e["prompt_pack"] = problem
        return e

    def errors(self, prefix: str = "simulator") -> dict[str, str]:
        """{field: problem} for everything wrong with the spec, checked without building anything; the keys
        are the run configs' field names (`simulator`, `prompt_pack`, `simulator_temperature`, ...)."""
        e = self.access_errors(prefix)
        if prefix not in e and (problem := spec_error(self.spec)):
            e[prefix] = problem
        if "prompt_pack" not in e and (problem := pack_error(self.pack)):
            e["prompt_pack"] = problem
        t = self.temperature
        if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool) or t < 0):
            e[prefix + "_temperature"] = f"must be >= 0 or empty, got {t!r}"
        n = self.max_tokens
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            e[prefix + "_max_tokens"] = f"must be a positive integer or empty, got {n!r}"
        if not isinstance(self.rules, EmotionRules):
            try:
                get_rules(self.rules)
            except (KeyError, ValueError) as exc:
                e["rules"] = str(exc.args[0] if exc.args else exc)
        if self.traffic is not None:
            e.update(self.traffic.errors(prefix + "_"))
        if self.calibration:
            if self.kind == "python":
                e["calibration"] = "outside code (python:) is its own simulated user; calibrate its scores there"
            else:
                try:
                    self.load_calibration()
                except (ValueError, OSError) as exc:
                    e["calibration"] = str(exc).removeprefix("calibration: ")
        return e

    def load_calibration(self) -> Any:
        """The named Calibration, or None without one (ValueError naming the problem)."""
        if not self.calibration:
            return None
        from simulator.user.calibration import load_calibration

        return load_calibration(self.calibration)

    def backend_options(self) -> dict[str, Any]:
        """The backend's keyword arguments (None values are dropped by make_backend)."""
        kw: dict[str, Any] = {"base_url": self.base_url or None, "temperature": self.temperature,
                              "max_tokens": self.max_tokens, "seed": self.seed, "api_key": self.api_key,
                              "access": self.access}
        if self.traffic is not None:
            kw.update(self.traffic.config_values())
        return kw

    def factory(self) -> SimulatorFactory:
        """factory(profile, seed) -> SentientAgent, every agent sharing one backend and one prompt pack;
        `python:` specs are outside code's own factory (simulator.user.outside). ValueError on a bad spec,
        AccessError (a ValueError) on one the caller may not use."""
        if problems := self.access_errors():
            raise ValueError("; ".join(f"{k}: {v}" for k, v in problems.items()))
        if self.kind == "python":
            from simulator.user.outside import simulator_factory

            return simulator_factory(self.spec.strip(), self.access)
        rules = self.rules if isinstance(self.rules, EmotionRules) else get_rules(self.rules)
        backend = make_backend(self.spec, **self.backend_options())
        prompts = load_pack(self.pack)
        calibration = self.load_calibration()

        def factory(profile: Profile, seed: int) -> SentientAgent:
            return SentientAgent(profile, backend, rules, seed=seed, pack=prompts, calibration=calibration)

        return factory


def _simulator_refusal(access: Access, name: str, value: object) -> str:
    """Why the caller may not use simulator spec `value`: its outside code or its replay file."""
    return SimulatorSpec(value, access=access).access_errors(name).get(name, "") if isinstance(value, str) else ""


def _pack_refusal(access: Access, name: str, value: object) -> str:
    """Why the caller may not name prompt pack `value`'s folder (sage:DIR, rlver:DIR)."""
    return SimulatorSpec(pack=value, access=access).access_errors().get("prompt_pack", "") \
        if isinstance(value, str) else ""


register_kind("simulator", _simulator_refusal)
register_kind("pack", _pack_refusal)
