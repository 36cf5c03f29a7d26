"""Prompt-cache token counts in the call log.

Revision ID: 0003
Revises: 0002

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('call_log') as batch:
        batch.add_column(sa.Column('cache_read_tokens', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('cache_write_tokens', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('call_log') as batch:
        batch.drop_column('cache_write_tokens')
        batch.drop_column('cache_read_tokens')
