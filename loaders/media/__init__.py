"""Media decoding for the read path and the inspector: images (Pillow), video (PyAV) and frame codes.

>>> from loaders.media import thumbnail, decode_frames      # doctest: +SKIP
>>> thumbnail(image_bytes, max_side=256, where="dataset images row 3")   # doctest: +SKIP
"""

from .crop import Crop, crop_box, decode_crop, draw_box, random_resized_crop
from .encode import encode_jpeg, encode_png, encode_video
from .framecode import code_blocks, draw_frame_code, read_frame_code
from .image import (
    ImageInfo,
    has_alpha,
    image_from_value,
    image_info,
    media_type,
    open_image,
    pixel_diff,
    render_png,
    resolve_media_path,
    thumbnail,
    to_display_mode,
)
from .video import DecodeStats, VideoInfo, VideoSource, decode_frames, frame_at_time, probe, video_source

__all__ = [
    "Crop",
    "DecodeStats",
    "ImageInfo",
    "VideoInfo",
    "VideoSource",
    "code_blocks",
    "crop_box",
    "decode_crop",
    "decode_frames",
    "draw_box",
    "draw_frame_code",
    "encode_jpeg",
    "encode_png",
    "encode_video",
    "frame_at_time",
    "has_alpha",
    "image_from_value",
    "image_info",
    "media_type",
    "open_image",
    "pixel_diff",
    "probe",
    "random_resized_crop",
    "read_frame_code",
    "render_png",
    "resolve_media_path",
    "thumbnail",
    "to_display_mode",
    "video_source",
]
