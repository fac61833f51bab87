"""The ``library_faces`` table (migrations ``0014_face_library``, ``0019_library_face_turned``).
The image and the prepared source live in the tenant's storage
(``tenants/<t>/faces/<id>/image|face``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class LibraryFace(Base):
    """One saved source face of one tenant."""

    __tablename__ = "library_faces"
    __table_args__ = (Index("ix_library_faces_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    labels: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    # The uploaded image: its sha256 (the consent record's source), type and size.
    image_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    image_content_type: Mapped[str] = mapped_column(String(64), nullable=False)
    width: Mapped[int] = mapped_column(Integer, nullable=False)
    height: Mapped[int] = mapped_column(Integer, nullable=False)
    # The chosen face: its index in ``face_order`` among the faces found, and its box.
    face_index: Mapped[int] = mapped_column(Integer, nullable=False)
    face_order: Mapped[str] = mapped_column(String(16), nullable=False)
    face_box: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    # Its identity descriptor, computed once at save (dlib's ResNet where installed, else
    # the geometric one: ``embedding_kind`` says which).
    embedding: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    embedding_kind: Mapped[str] = mapped_column(String(32), nullable=False)
    # How far it is turned from the camera (degrees, the larger of |yaw| and |pitch|, one
    # decimal: ``reshape.Shape.turned``); None for faces saved before it was recorded.
    turned: Mapped[float | None] = mapped_column(Float, default=None)
    # The consent attestation (consent.schemas.ConsentRef) recorded with it, if any.
    consent: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    created_by: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), nullable=False, default=utcnow, onupdate=utcnow
    )
