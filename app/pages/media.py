"""One media field of a dataset sample: where its bytes are, what the inspector makes of them, and its view page.

Everything here is addressed by ``(version id, key, field)``: a version is
immutable, so a thumbnail, a decoded frame or an image with a box drawn on
it never changes and is cached (``app.media_cache``) and served forever.
Stored paths are resolved only through ``loaders.media`` (inside the shard's
directory), never taken from a URL.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from loaders import Catalog, DatasetVersion
from loaders.catalog.kinds import PICTURE_KINDS
from loaders.catalog.media_files import read_media
from loaders.errors import DecodeError, NotFound, SampleNotFound
from loaders.media import (
    VideoInfo,
    decode_frames,
    draw_box,
    encode_jpeg,
    frame_at_time,
    image_from_value,
    image_info,
    open_image,
    probe,
    render_png,
    resolve_media_path,
    thumbnail,
    video_source,
)

from .. import urls
from ..decode_budget import DecodeBudget, frame_decode_bytes, image_decode_bytes, jpeg_reduction
from ..errors import BadQuery
from ..jsonable import html_only
from ..media_cache import MediaCache
from ..renderers.image import image_view
from ..renderers.registry import ErrorView, FieldContext, View
from ..renderers.video import video_view
from .common import Link

MIN_SIDE, MAX_SIDE = 16, 4096
#: The thumbnail sizes made (longest side): a ``thumb=`` in range is snapped up to one of them (the largest at most), so
#: however many distinct values are asked for, an image is decoded and cached at these sizes only.
THUMB_SIDES = (64, 128, 160, 256, 512, 1024, 2048)
FRAME_QUALITY = 90


class MediaRequestError(BadQuery):
    """A media URL asks for something its field cannot give (a frame of an image, a box outside the image)."""


class FrameOutOfRange(NotFound):
    """A frame index (or time) past the end of a clip."""


class MediaField:
    """One field of one sample: its address at once; its row is read (verified) only when something must be made from it.

    So a cached thumbnail or frame is answered without touching the shard.
    """

    def __init__(self, version: DatasetVersion, key: str, field: str) -> None:
        columns = version.schema.names
        if field not in columns:
            raise SampleNotFound(f"{version.ref} has no column {field!r} (columns: {', '.join(columns)})")
        self.version, self.key, self.field = version, key, field
        self.kind = version.kinds.get(field, "json")
        self._located: tuple[int, int, dict[str, Any]] | None = None

    def _locate(self) -> tuple[int, int, dict[str, Any]]:
        if self._located is None:
            shard, row = self.version.find(self.key)
            self._located = (shard, row, self.version.read(shard, [row])[0])
        return self._located

    @property
    def shard(self) -> int:
        return self._locate()[0]

    @property
    def row(self) -> int:
        return self._locate()[1]

    @property
    def record(self) -> dict[str, Any]:
        return self._locate()[2]

    @property
    def value(self) -> Any:
        return self.record.get(self.field)

    @property
    def where(self) -> str:
        """``dataset d version v shard s (file) row r column c``: how errors name this field."""
        return f"{self.version.where(self.shard, self.row)} column {self.field}"

    @property
    def address(self) -> tuple[str, str, str]:
        return (self.version.id, self.key, self.field)

    @property
    def shard_uri(self) -> str:
        return self.version.shards[self.shard].uri

    def stored_name(self) -> str | None:
        """The path a by-path value holds, as stored (relative to its shard's directory): what pages show of it.

        The file it resolves to (:meth:`stored_path`) is the server's business, never shown.
        """
        value = self.value
        if isinstance(value, dict) and value.get("bytes") is None and isinstance(value.get("path"), str):
            return str(value["path"])
        if isinstance(value, str) and self.kind == "video":
            return value
        return None

    def stored_path(self) -> str | None:
        """The file a by-path value names, resolved inside the shard's directory (``None`` for inline bytes)."""
        value = self.value
        if isinstance(value, dict) and value.get("bytes") is None and isinstance(value.get("path"), str):
            return resolve_media_path(value["path"], shard_uri=self.shard_uri, where=self.where)
        if isinstance(value, str) and self.kind == "video":
            return resolve_media_path(value, shard_uri=self.shard_uri, where=self.where)
        return None

    def image_bytes(self) -> bytes:
        """The encoded image, inline or read from its stored path."""
        data = image_from_value(self.value, where=self.where)
        if data is not None:
            return data
        path = self.stored_path()
        assert path is not None
        return self.stored_bytes(path)

    def stored_bytes(self, path: str) -> bytes:
        """The bytes of the file this field names, checked against the checksum registration recorded."""
        return read_media(self.version, path, where=self.where)

    def video_source(self) -> bytes | str:
        """Inline clip bytes, or the clip stored by path (its checked bytes; its path for versions without media checksums)."""
        source = video_source(self.value, shard_uri=self.shard_uri, where=self.where)
        if isinstance(source, str) and self.version.manifest.media_files is not None:
            return self.stored_bytes(source)
        return source  # type: ignore[return-value]


def load_field(version: DatasetVersion, key: str, field: str) -> MediaField:
    """``field`` of the sample ``key`` (its row is read when first needed, through the verified read path)."""
    return MediaField(version, key, field)


def require_kind(media: MediaField, *kinds: str) -> None:
    if media.kind not in kinds:
        wanted = " or ".join(kinds)
        raise MediaRequestError(f"{media.version.ref} column {media.field!r} is {media.kind}, not {wanted}")


def check_side(size: int) -> int:
    """The thumbnail size made for ``thumb=size``: the smallest of ``THUMB_SIDES`` at least ``size`` (else the largest).

    >>> check_side(16), check_side(256), check_side(300), check_side(4096)
    (64, 256, 512, 2048)
    """
    if not MIN_SIDE <= size <= MAX_SIDE:
        raise MediaRequestError(f"thumb={size} is out of range: {MIN_SIDE}-{MAX_SIDE} pixels")
    return next((side for side in THUMB_SIDES if side >= size), THUMB_SIDES[-1])


def _image_needs(data: bytes, media: "MediaField", *, side: int | None, extra_copy: bool = False) -> int:
    """Memory decoding the image ``data`` needs (read from its header), for a thumbnail of ``side`` or at full size."""
    info = image_info(data, where=media.where)
    reduction = jpeg_reduction(info.width, info.height, side) if info.format == "JPEG" else 1
    needed = image_decode_bytes(info.width, info.height, info.mode, reduction=reduction, rotated=info.orientation not in (None, 1))
    return needed + (info.width * info.height * 4 if extra_copy else 0)


def parse_box(text: str) -> tuple[int, int, int, int]:
    """``"l,t,r,b"`` → four ints (validated against the image later)."""
    try:
        left, top, right, bottom = (int(part) for part in text.split(","))
    except ValueError:
        raise MediaRequestError(f"box={text!r} is not four comma-separated integers left,top,right,bottom") from None
    return left, top, right, bottom


# -- what the inspector makes, cached --------------------------------------------------
def _jpeg_thumbnail(frame: np.ndarray, size: int) -> bytes:
    img = Image.fromarray(frame)
    img.thumbnail((size, size), Image.Resampling.LANCZOS, reducing_gap=2.0)
    return encode_jpeg(np.asarray(img), quality=85)


def video_info(cache: MediaCache, media: MediaField) -> VideoInfo:
    """Container, codec, fps, duration and frame count of a video field (probed once, no frame decoded)."""
    return cache.get_or_make(("probe", *media.address), lambda: probe(media.video_source(), where=media.where))


def check_frame(info: VideoInfo, media: MediaField, index: int) -> int:
    if not 0 <= index < info.frame_count:
        raise FrameOutOfRange(f"frame {index} is out of range: {media.where} has {info.frame_count} frames (0 to {info.frame_count - 1})")
    return index


def frame_image(cache: MediaCache, budget: DecodeBudget, media: MediaField, index: int, *, size: int | None = None) -> bytes:
    """Frame ``index`` of a video field as JPEG (``size``: a thumbnail of it); decodes that one frame only, within ``budget``."""
    require_kind(media, "video")
    info = video_info(cache, media)
    check_frame(info, media, index)
    needed = frame_decode_bytes(info.width, info.height)
    what = f"frame {index} ({info.width}x{info.height}) of {media.where}"
    if size is not None:
        side = check_side(size)

        def shrink() -> bytes:
            full = frame_image(cache, budget, media, index)
            with budget.decoding(needed, what):
                return _jpeg_thumbnail(np.asarray(Image.open(io.BytesIO(full)).convert("RGB")), side)

        return cache.get_or_make(("frame", *media.address, index, side), shrink)

    def make() -> bytes:
        with budget.decoding(needed, what):
            (decoded,) = decode_frames(media.video_source(), [index], where=media.where)
            return encode_jpeg(decoded, quality=FRAME_QUALITY)

    return cache.get_or_make(("frame", *media.address, index, None), make)


def thumbnail_image(cache: MediaCache, budget: DecodeBudget, media: MediaField, size: int) -> bytes:
    """A thumbnail (longest side ``size``, snapped to ``THUMB_SIDES``): of the image, EXIF applied; of a video, its first frame."""
    require_kind(media, *PICTURE_KINDS)
    side = check_side(size)
    if media.kind == "video":
        return frame_image(cache, budget, media, 0, size=side)

    def make() -> bytes:
        data = media.image_bytes()
        with budget.decoding(_image_needs(data, media, side=side), f"the image at {media.where}"):
            return thumbnail(data, max_side=side, where=media.where)

    return cache.get_or_make(("thumb", *media.address, side), make)


def boxed_image(
    cache: MediaCache, budget: DecodeBudget, media: MediaField, box: tuple[int, int, int, int], *, size: int | None = None
) -> bytes:
    """The image upright with ``box`` (left, top, right, bottom, in upright pixels) outlined: PNG, or a thumbnail."""
    require_kind(media, "image")
    side = check_side(size) if size is not None else None

    def make() -> bytes:
        data = media.image_bytes()
        info = image_info(data, where=media.where)
        left, top, right, bottom = box
        if not (0 <= left < right <= info.width and 0 <= top < bottom <= info.height):
            raise MediaRequestError(
                f"box={left},{top},{right},{bottom} is not inside the {info.width}x{info.height} image at {media.where}"
            )
        with budget.decoding(_image_needs(data, media, side=None, extra_copy=True), f"the image at {media.where}"):
            shown = draw_box(open_image(data, where=media.where), box)
            if side is None:
                return render_png(shown)
            shown.thumbnail((side, side), Image.Resampling.LANCZOS, reducing_gap=2.0)
            return encode_jpeg(np.asarray(shown.convert("RGB")), quality=88)

    return cache.get_or_make(("box", *media.address, box, side), make)


# -- the view page -------------------------------------------------------------------------
@dataclass
class MediaPage:
    """One image or video field alone: metadata, and for a video the frame shown (``?frame=`` / ``?t=``)."""

    dataset: str
    version: str
    ref: str
    key: str
    field: str
    kind: str
    shard: int
    row: int
    url: str
    sample_url: str
    media_url: str
    info: dict[str, Any]
    frame: int | None = None
    time: float | None = None
    frame_url: str | None = None
    error: str | None = None
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    view: View | None = html_only(None)


def pick_frame(media: MediaField, info: VideoInfo, *, frame: int | None, t: float | None) -> int:
    """The frame a view URL asks for: ``frame``, else the frame shown at ``t`` seconds, else 0."""
    if frame is not None and t is not None:
        raise MediaRequestError("give frame or t, not both")
    if t is not None:
        try:
            return frame_at_time(media.video_source(), t, where=media.where)
        except DecodeError as exc:
            if "out of range" in exc.message:
                raise FrameOutOfRange(exc.message) from None
            raise
    return check_frame(info, media, frame or 0)


def _video_part(
    cache: MediaCache, budget: DecodeBudget, media: MediaField, ctx: FieldContext, *, frame: int | None, t: float | None, page: bool
) -> tuple[View, dict[str, Any], int | None, str | None]:
    try:
        info = video_info(cache, media)
    except DecodeError as exc:
        return ErrorView(message=exc.message), {}, None, exc.message
    index = pick_frame(media, info, frame=frame, t=t)
    error = None
    try:
        frame_image(cache, budget, media, index)  # decoded now, so a broken frame shows inline (and the <img> is a cache hit)
    except DecodeError as exc:
        error = exc.message
    view = video_view(info, ctx, frame=index, page=page, error=error or "")
    view.path = media.stored_name()
    return view, dataclasses.asdict(info), index, error


def media_page(
    catalog: Catalog,
    cache: MediaCache,
    budget: DecodeBudget,
    version: DatasetVersion,
    key: str,
    field: str,
    *,
    frame: int | None = None,
    t: float | None = None,
    page: bool = True,
) -> MediaPage:
    """The view page of one image or video field; a video opens on ``frame`` (or the frame at ``t`` seconds).

    ``page`` is False when the view is loaded into another page (a fragment): its scrubber then leaves that page's URL alone.
    """
    media = load_field(version, key, field)
    require_kind(media, *PICTURE_KINDS)
    name = version.name
    media_url = urls.media(name, version, key, field)
    ctx = FieldContext(
        column=field,
        kind=media.kind,
        record=media.record,
        kinds=version.kinds,
        full=True,
        media_url=media_url,
        where=version.where(media.shard, media.row),
    )
    index: int | None = None
    error: str | None = None
    if media.kind == "video":
        view, info, index, error = _video_part(cache, budget, media, ctx, frame=frame, t=t, page=page)
    else:
        if frame is not None or t is not None:
            raise MediaRequestError(f"{version.ref} column {field!r} is an image: it has no frame {frame if frame is not None else t}")
        try:
            image = image_view(media.image_bytes(), ctx, path=media.stored_name())
            view, info = image, dataclasses.asdict(image.info) if image.info else {}
        except DecodeError as exc:
            view, info, error = ErrorView(message=exc.message), {}, exc.message
    fps = info.get("fps")
    return MediaPage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        key=key,
        field=field,
        kind=media.kind,
        shard=media.shard,
        row=media.row,
        url=urls.media_view(name, version, key, field, frame=index),
        sample_url=urls.sample(name, version, key),
        media_url=media_url,
        info=info,
        frame=index,
        time=round(index / fps, 6) if index is not None and fps else None,
        frame_url=urls.frame(name, version, key, field, index) if index is not None else None,
        error=error,
        title=f"{field} of {key} · {version.ref}" + (f" · frame {index}" if index is not None else ""),
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(version.short_id, urls.version(name, version)),
            Link(key, urls.sample(name, version, key)),
            Link(field, urls.media_view(name, version, key, field)),
        ],
        view=view,
    )
