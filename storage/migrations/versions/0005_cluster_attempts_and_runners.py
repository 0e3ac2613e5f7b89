"""job.attempt; experiment.runner_host, experiment.runner_heartbeat_at: one Ray submission per attempt, and an
experiment runner's liveness in the store

Revision 0005, after 0004. A job's `attempt` counts its launches before the current one (a resume adds one), so
each attempt has one deterministic Ray submission id and a second submission of it is refused by Ray. An
experiment's runner records its host and heartbeats beside `runner_pid`, so every instance of the lab, on any
machine, sees whether it lives (a lock file on one disk did before).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None
OWNER_DECISION = ""


def _missing(table: str, names: tuple[str, ...]) -> list[str]:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}
    return [n for n in names if n not in have]


def upgrade() -> None:
    if _missing("job", ("attempt",)):
        with op.batch_alter_table('job', schema=None) as batch_op:
            batch_op.add_column(sa.Column('attempt', sa.Integer(), nullable=False, server_default="0"))
    missing = _missing("experiment", ("runner_host", "runner_heartbeat_at"))
    with op.batch_alter_table('experiment', schema=None) as batch_op:
        if "runner_host" in missing:
            batch_op.add_column(sa.Column('runner_host', sa.String(length=255), nullable=False, server_default=""))
        if "runner_heartbeat_at" in missing:
            batch_op.add_column(sa.Column('runner_heartbeat_at', sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('experiment', schema=None) as batch_op:
        batch_op.drop_column('runner_heartbeat_at')
        batch_op.drop_column('runner_host')
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_column('attempt')
