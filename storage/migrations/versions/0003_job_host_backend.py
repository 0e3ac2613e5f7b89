"""job.host, job.backend, job.backend_address, job.backend_job_id: where a job runs and who runs it

Revision 0003, after 0002. A job's owner records the host it runs on and the backend that started it
(`local`: a process of the launching machine; `ray`: a Ray job, with the cluster's Jobs API address and the
submission id), so liveness is read from the store and the backend rather than from a lock file on one disk.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None
OWNER_DECISION = ""

COLUMNS = (("host", sa.String(length=255)), ("backend", sa.String(length=16)), ("backend_address", sa.Text()),
           ("backend_job_id", sa.String(length=64)))


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("job")}
    with op.batch_alter_table('job', schema=None) as batch_op:
        for name, type_ in COLUMNS:
            if name not in have:
                default = "local" if name == "backend" else ""
                batch_op.add_column(sa.Column(name, type_, nullable=False, server_default=default))


def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        for name, _ in reversed(COLUMNS):
            batch_op.drop_column(name)
