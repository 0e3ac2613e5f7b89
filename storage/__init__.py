"""The store: SQLAlchemy models and engine/session setup. Nothing else in the project writes SQL."""
from storage.db import Store, code_version, default_url, lab_home, make_engine, read_scope, session_scope, store_id
from storage.models import (
                            Base,
                            Checkpoint,
                            Comparison,
                            ComparisonPair,
                            Dialogue,
                            EvalRun,
                            Experiment,
                            ExperimentCell,
                            Job,
                            JudgeScore,
                            Metric,
                            Persona,
                            PersonaCandidate,
                            PersonaGeneration,
                            Turn,
)
from storage.ratings import HumanRating, ShadowJudgement  # registers the people-in-the-loop tables with Base

__all__ = ["Base", "Checkpoint", "Comparison", "ComparisonPair", "Dialogue", "EvalRun", "Experiment",
           "ExperimentCell", "HumanRating", "Job", "JudgeScore", "Metric", "Persona", "PersonaCandidate", "PersonaGeneration",
           "ShadowJudgement", "Store", "Turn", "code_version", "default_url", "lab_home", "make_engine", "read_scope", "session_scope",
           "store_id"]
