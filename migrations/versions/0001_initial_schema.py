"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None

def upgrade() -> None:

    op.create_table('http_validator',
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=1024), nullable=False),
    sa.Column('etag', sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
    sa.Column('last_modified', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('url')
    )
    op.create_table('paper',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('latest_version', sa.Integer(), nullable=False),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('source_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('fetched', sa.Integer(), nullable=False),
    sa.Column('new_papers', sa.Integer(), nullable=False),
    sa.Column('revisions', sa.Integer(), nullable=False),
    sa.Column('duplicates', sa.Integer(), nullable=False),
    sa.Column('cursor', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('source_run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_source_run_source'), ['source'], unique=False)

    op.create_table('subscriber',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('address', sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
    sa.Column('timezone', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('schedule', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_digest_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('address')
    )
    op.create_table('digest',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscriber_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('item_count', sa.Integer(), nullable=False),
    sa.Column('channel', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('platform_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['subscriber_id'], ['subscriber.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('digest', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_digest_subscriber_id'), ['subscriber_id'], unique=False)

    op.create_table('follow',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscriber_id', sa.Integer(), nullable=False),
    sa.Column('query', sa.Text(), nullable=False),
    sa.Column('canonical', sqlmodel.sql.sqltypes.AutoString(length=1024), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['subscriber_id'], ['subscriber.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('subscriber_id', 'canonical', name='uq_follow_subscriber_query')
    )
    with op.batch_alter_table('follow', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_follow_subscriber_id'), ['subscriber_id'], unique=False)

    op.create_table('version',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('paper_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('abstract', sa.Text(), nullable=False),
    sa.Column('authors', sa.JSON(), nullable=False),
    sa.Column('categories', sa.JSON(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('journal_ref', sa.Text(), nullable=True),
    sa.Column('doi', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('license', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('announce_type', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('ai_related', sa.Boolean(), nullable=False),
    sa.Column('announced_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('matched_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['paper_id'], ['paper.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('paper_id', 'number', name='uq_version_paper_number')
    )
    with op.batch_alter_table('version', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_version_first_seen_at'), ['first_seen_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_version_matched_at'), ['matched_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_version_paper_id'), ['paper_id'], unique=False)

    op.create_table('match',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscriber_id', sa.Integer(), nullable=False),
    sa.Column('version_id', sa.Integer(), nullable=False),
    sa.Column('follow_ids', sa.JSON(), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('digest_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['digest_id'], ['digest.id'], ),
    sa.ForeignKeyConstraint(['subscriber_id'], ['subscriber.id'], ),
    sa.ForeignKeyConstraint(['version_id'], ['version.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('subscriber_id', 'version_id', name='uq_match_subscriber_version')
    )
    with op.batch_alter_table('match', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_match_digest_id'), ['digest_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_match_subscriber_id'), ['subscriber_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_match_version_id'), ['version_id'], unique=False)

def downgrade() -> None:

    with op.batch_alter_table('match', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_match_version_id'))
        batch_op.drop_index(batch_op.f('ix_match_subscriber_id'))
        batch_op.drop_index(batch_op.f('ix_match_digest_id'))

    op.drop_table('match')
    with op.batch_alter_table('version', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_version_paper_id'))
        batch_op.drop_index(batch_op.f('ix_version_matched_at'))
        batch_op.drop_index(batch_op.f('ix_version_first_seen_at'))

    op.drop_table('version')
    with op.batch_alter_table('follow', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_follow_subscriber_id'))

    op.drop_table('follow')
    with op.batch_alter_table('digest', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_digest_subscriber_id'))

    op.drop_table('digest')
    op.drop_table('subscriber')
    with op.batch_alter_table('source_run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_source_run_source'))

    op.drop_table('source_run')
    op.drop_table('paper')
    op.drop_table('http_validator')

