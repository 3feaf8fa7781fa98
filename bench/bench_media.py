"""Media benchmark: thumbnails of 4000×3000 JPEGs, one frame from the middle of a 60 s 720p H.264 clip, a step/rank page of 64 images.

Every figure has a baseline doing the same work with the same output, measured in the same run:

* **thumbnail** (256 px WebP, EXIF applied): Pillow decoding the whole JPEG, then
  resizing (bicubic) and encoding it the same way (no reduced-scale ``draft`` decoding).
  The inspector's figure is a request answered in-process (ASGI, no sockets):
  cold (nothing cached; the row is read and verified from Parquet) and cached.
* **frame**: the inspector decodes one frame by seeking to the keyframe before it
  (``loaders.media.video.decode_frames``); the baseline decodes the clip
  sequentially from its start up to that frame. Both give the same pixels
  (checked, and the frame code painted on it is read back).
* **step/rank page** of a run whose batch is 64 random-resized crops: the server
  time of its first HTML (cold: a new app, nothing of the run cached; median of
  6), against the read path alone computing that batch; and in real Chromium,
  the time until all 64 crop images have loaded.

    python -m bench --only media [--quick]
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from . import harness

NAME = "media"
FORMAT = 1
THUMB = 256
GOALS_MS = {"thumbnail_cold": 50.0, "thumbnail_cached": 2.0, "frame_cold": 100.0, "page_first_html": 150.0, "page_browser": 1500.0}


# -- data ---------------------------------------------------------------------------------
def _photo(seed: int, width: int, height: int) -> bytes:
    """A photo-like JPEG (smooth shapes plus sensor noise), quality 90, with an EXIF orientation of 1."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    ys = np.linspace(0, 1, height, dtype=np.float32)[:, None]
    xs = np.linspace(0, 1, width, dtype=np.float32)[None, :]
    fx, fy, phase = rng.uniform(3, 9), rng.uniform(2, 7), rng.uniform(0, 6)
    channels = [
        128 + 100 * np.sin(xs * fx * 6.28 + phase) * np.cos(ys * fy * 6.28),
        128 + 100 * np.sin((xs + ys) * fy * 3.14 + phase),
        255 * (xs * 0.7 + ys * 0.3) + 0 * ys,
    ]
    pixels = np.stack([np.broadcast_to(c, (height, width)) for c in channels], axis=-1)
    pixels = pixels + rng.normal(0, 5, size=(height, width, 1)).astype(np.float32)
    img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    exif = Image.Exif()
    exif[0x0112] = 1
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


def _clip_frames(count: int, width: int, height: int) -> Iterator[np.ndarray]:
    from PIL import Image

    from loaders.media import draw_frame_code

    ys, xs = np.mgrid[0:height, 0:width]
    base = ((xs * 255) // max(1, width - 1)).astype(np.uint8)
    for index in range(count):
        shift = (index * 4) % width
        red = np.roll(base, shift, axis=1)
        frame = np.stack([red, np.full_like(red, (index * 3) % 256), ((ys * 255) // max(1, height - 1)).astype(np.uint8)], -1)
        img = Image.fromarray(frame)
        draw_frame_code(img, index)
        yield np.asarray(img)


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"photos": 3, "clip": (640, 360, 30, 10), "crop_images": 128}
    return {"photos": 8, "clip": (1280, 720, 30, 60), "crop_images": 128}


def _build(workdir: Path, quick: bool) -> Path:
    """The bench catalog (built once per size): photos, a clip stored by path, crops and a run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from loaders import Catalog, RandomResizedCrop, ReadPlan, Source
    from loaders.media import encode_video

    sizes = _sizes(quick)
    root = workdir / ("quick" if quick else "full")
    marker = root / "built.json"
    expected = {"format": FORMAT, **{k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()}}
    if marker.exists() and json.loads(marker.read_text()) == expected:
        return root
    shutil.rmtree(root, ignore_errors=True)
    (root / "data").mkdir(parents=True)
    catalog = Catalog(root / "catalog")
    media = pa.struct([("bytes", pa.binary()), ("path", pa.string())])

    photos = [_photo(i, 4000, 3000) for i in range(sizes["photos"])]
    table = pa.table(
        {"id": [f"photo-{i}" for i in range(len(photos))], "image": pa.array([{"bytes": p, "path": None} for p in photos], media)}
    )
    pq.write_table(table, root / "data" / "photos.parquet", row_group_size=1)
    catalog.register("photos", [str(root / "data" / "photos.parquet")], key="id", tag="v1", kinds={"image": "image"})

    width, height, fps, seconds = sizes["clip"]
    clip_dir = root / "data" / "clip"
    (clip_dir / "media").mkdir(parents=True)
    clip = encode_video(_clip_frames(fps * seconds, width, height), fps=fps, codec="h264", gop=2 * fps, crf=23)
    (clip_dir / "media" / "clip.mp4").write_bytes(clip)
    table = pa.table({"id": ["clip"], "video": pa.array([{"bytes": None, "path": "media/clip.mp4"}], media)})
    pq.write_table(table, clip_dir / "part-0.parquet")
    catalog.register("clip", [str(clip_dir / "part-0.parquet")], key="id", tag="v1", kinds={"video": "video"})

    count = sizes["crop_images"]
    small = [_photo(100 + i, 640, 480) for i in range(count)]
    table = pa.table({"id": [f"img-{i:04d}" for i in range(count)], "image": pa.array([{"bytes": p, "path": None} for p in small], media)})
    pq.write_table(table, root / "data" / "crops.parquet", row_group_size=8)
    catalog.register("crops", [str(root / "data" / "crops.parquet")], key="id", tag="v1", kinds={"image": "image"})
    plan = ReadPlan(
        [Source("crops@v1", transforms=[RandomResizedCrop("image", size=(64, 64), scale=(0.3, 1.0))])],
        seed=0,
        global_batch_size=64,
        steps=2,
        streams=1,
    )
    catalog.create_run("bench-crops", plan)
    marker.write_text(json.dumps(expected))
    return root


# -- in-process requests --------------------------------------------------------------------
def _app(root: Path) -> Any:
    from app.factory import create_app
    from app.settings import Settings

    return create_app(Settings(root=str(root / "catalog"), flags_path=str(root / "flags.sqlite")))


def _timed_gets(app: Any, urls_: list[str]) -> list[float]:
    """Seconds per request, answered in-process (ASGI; no sockets, no client threads).

    The app is started first as a server starts it (its lifespan), untimed.
    """
    import httpx

    async def go() -> list[float]:
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            times = []
            for url in urls_:
                start = time.perf_counter()
                response = await client.get(url)
                times.append(time.perf_counter() - start)
                if response.status_code != 200:
                    raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:300]}")
            return times

    return asyncio.run(go())


def _ms(seconds: list[float]) -> dict[str, Any]:
    return harness.Timing(tuple(seconds)).to_json()


# -- thumbnails --------------------------------------------------------------------------------
def _baseline_thumbnail(data: bytes) -> bytes:
    """The same thumbnail (filter, encoder settings) from the JPEG decoded at full size."""
    from PIL import Image, ImageOps

    from loaders.media.image import THUMBNAIL_WEBP_METHOD

    img = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    img.thumbnail((THUMB, THUMB), Image.Resampling.BICUBIC, reducing_gap=2.0)
    buffer = io.BytesIO()
    img.save(buffer, format="WEBP", quality=80, method=THUMBNAIL_WEBP_METHOD)
    return buffer.getvalue()


def measure_thumbnails(root: Path) -> dict[str, Any]:
    from PIL import Image

    from app import urls
    from loaders import Catalog
    from loaders.media import thumbnail

    catalog = Catalog(root / "catalog")
    version = catalog.resolve("photos@v1")
    keys = [f"photo-{i}" for i in range(version.rows)]
    app = _app(root)
    _timed_gets(app, [urls.api(urls.dataset("photos"))])  # a first request (threads, lazy imports) that reads no photo
    built = [urls.thumbnail("photos", version.id, key, "image", size=THUMB) for key in keys]
    cold = _timed_gets(app, built)  # each photo's first request: its row is read and verified, its thumbnail made
    cached = _timed_gets(app, [built[0]] * 60)[10:]
    photos = []
    for index in range(version.rows):
        shard, row = version.locate(index)
        photos.append(version.read(shard, [row])[0]["image"]["bytes"])
    function = [harness.time_repeated(lambda p=p: thumbnail(p, max_side=THUMB, where="bench"), repeat=1).samples[0] for p in photos]
    baseline = [harness.time_repeated(lambda p=p: _baseline_thumbnail(p), repeat=1).samples[0] for p in photos]
    ours, theirs = (
        Image.open(io.BytesIO(thumbnail(photos[0], max_side=THUMB, where="bench"))),
        Image.open(io.BytesIO(_baseline_thumbnail(photos[0]))),
    )
    assert ours.size == theirs.size, (ours.size, theirs.size)
    return {
        "photo": {"width": 4000, "height": 3000, "jpeg_bytes_median": int(np.median([len(p) for p in photos])), "count": len(photos)},
        "thumbnail_side": THUMB,
        "cold_request": _ms(cold),
        "cached_request": _ms(cached),
        "thumbnail_function": _ms(function),
        "baseline_full_decode": _ms(baseline),
    }


# -- one frame ----------------------------------------------------------------------------------
def _sequential(path: str, target: int) -> np.ndarray:
    """Decode from the first frame on until ``target`` (frame order), like a reader without seeking."""
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_type = "AUTO"
        for number, frame in enumerate(container.decode(stream)):
            if number == target:
                return frame.to_ndarray(format="rgb24")
    raise RuntimeError(f"{path} has no frame {target}")


def measure_frame(root: Path) -> dict[str, Any]:
    from app import urls
    from loaders import Catalog
    from loaders.media import DecodeStats, decode_frames, probe, read_frame_code

    catalog = Catalog(root / "catalog")
    version = catalog.resolve("clip@v1")
    path = str(root / "data" / "clip" / "media" / "clip.mp4")
    info = probe(path, where="bench")
    gop = round(2 * info.fps)
    keyframe = (info.frame_count // 2 // gop) * gop  # the keyframe at (or just before) the middle of the clip
    targets = {"middle": keyframe + gop // 2, "middle_worst": keyframe + gop - 1}
    figures: dict[str, Any] = {
        "clip": {
            "width": info.width,
            "height": info.height,
            "fps": info.fps,
            "frames": info.frame_count,
            "keyframe_interval": gop,
            "codec": info.codec,
        },
    }
    for label, target in targets.items():
        stats = DecodeStats()
        decode_frames(path, [target], where="bench", stats=stats)  # warm the file cache and the decoder libraries
        seek = harness.time_repeated(lambda t=target: decode_frames(path, [t], where="bench"), repeat=5)
        (ours,) = decode_frames(path, [target], where="bench")
        base_times = harness.time_repeated(lambda t=target: _sequential(path, t), repeat=2)
        theirs = _sequential(path, target)
        same = bool(np.array_equal(ours, theirs)) and read_frame_code(ours) == target == read_frame_code(theirs)
        app = _app(root)
        _timed_gets(app, [urls.frame("clip", version.id, "clip", "video", 0)])  # a first request: probe, imports, threads
        same_offset = [target - gop, target, target + gop]  # cold each: frames never asked for, as far from their keyframe
        endpoint = _timed_gets(app, [urls.frame("clip", version.id, "clip", "video", t) for t in same_offset if 0 <= t < info.frame_count])
        figures[label] = {
            "frame": target,
            "frames_decoded": stats.decoded,
            "seeks": stats.seeks,
            "decode_seek": seek.to_json(),
            "request_cold": _ms(endpoint),
            "baseline_sequential": base_times.to_json(),
            "same_pixels": same,
        }
    return figures


# -- the step/rank page ----------------------------------------------------------------------------
def measure_page(root: Path, *, repeat: int = 6) -> dict[str, Any]:
    """The first HTML of the step/rank page, each time from a new app (nothing of the run cached), against ``run.batch`` alone.

    Steps 0 and 1 alternate. The row groups are read once beforehand, untimed,
    into the process-wide row-group cache, for the pages and the baseline alike.
    """
    from app import urls
    from loaders import Catalog

    steps = [i % 2 for i in range(repeat)]
    Catalog(root / "catalog").run("bench-crops").batch(1, 0)  # the row groups, into the process-wide cache
    baseline = []
    for step in steps:
        run = Catalog(root / "catalog").run("bench-crops")
        start = time.perf_counter()
        batch = run.batch(step, 0)
        baseline.append(time.perf_counter() - start)
    first = [_timed_gets(_app(root), [urls.rank("bench-crops", step, 0)])[0] for step in steps]
    app = _app(root)
    again = _timed_gets(app, [urls.rank("bench-crops", 1, 0)] * 4)
    return {
        "samples": len(batch.samples),
        "first_html_cold": _ms(first),
        "html_again": _ms(again[1:]),
        "baseline_batch": _ms(baseline),
    }


def measure_browser(root: Path) -> dict[str, Any]:
    """Real Chromium: navigation start until all 64 crop images are decoded (the server starts cold)."""
    from app import urls

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        return {"status": "not run", "reason": f"{chromium} is missing"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        return {"status": "not run", "reason": f"playwright is not installed: {exc}"}
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    env = {**os.environ, "BATCHSCOPE_FLAGS_PATH": str(root / "browser-flags.sqlite")}
    env.pop("BATCHSCOPE_TOKEN", None)
    process = subprocess.Popen(
        [batchscope, "serve", "--root", str(root / "catalog"), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    return {"status": "failed", "reason": "the inspector did not start"}
                time.sleep(0.1)
        loaded = (
            "(() => { if (document.readyState === 'loading') return 0;"
            " const i = Array.from(document.querySelectorAll('.model-image .crop img'));"
            " return i.length > 0 && i.every(x => x.complete && x.naturalWidth > 0) ? i.length : 0; })()"
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                times = []
                for step in (0, 1):  # each step's page is cold on the server
                    page.goto(f"http://127.0.0.1:{port}{urls.rank('bench-crops', step, 0)}", wait_until="commit")
                    count = 0
                    limit = time.monotonic() + 30
                    while not count and time.monotonic() < limit:
                        count = page.evaluate(loaded)
                        if not count:
                            time.sleep(0.01)
                    times.append(page.evaluate("performance.now()"))
                    if count != 64:
                        return {"status": "failed", "reason": f"{count} crop images loaded at step {step}"}
            finally:
                browser.close()
        return {"status": "ok", "all_crops_loaded_ms": [round(t, 1) for t in times], "images": 64}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


# -- the document -------------------------------------------------------------------------------
def _met(measured: float | None, goal: float) -> dict[str, Any]:
    return harness.goal(f"<= {goal:g} ms", measured, None if measured is None else measured <= goal)


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Build the data once, then measure thumbnails, one frame and the step/rank page against their baselines."""
    root = _build(Path(workdir) / "media", quick)
    thumbs = measure_thumbnails(root)
    frame = measure_frame(root)
    page = measure_page(root)
    browser = measure_browser(root)
    middle = frame["middle"]
    browser_ms = max(browser["all_crops_loaded_ms"]) if browser.get("status") == "ok" else None
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "Pillow full decode for thumbnails; sequential decode from the clip's start for a frame; run.batch alone for the page",
        },
        results=[{"thumbnails": thumbs}, {"frame": frame}, {"page": page}, {"browser": browser}],
        ratios={
            "thumbnail_vs_full_decode": harness.ratio(
                thumbs["thumbnail_function"]["median_ms"], thumbs["baseline_full_decode"]["median_ms"]
            ),
            "thumbnail_cached_vs_cold": harness.ratio(thumbs["cached_request"]["median_ms"], thumbs["cold_request"]["median_ms"], 4),
            "frame_seek_vs_sequential": harness.ratio(middle["decode_seek"]["median_ms"], middle["baseline_sequential"]["median_ms"], 4),
            "frame_worst_seek_vs_sequential": harness.ratio(
                frame["middle_worst"]["decode_seek"]["median_ms"], frame["middle_worst"]["baseline_sequential"]["median_ms"], 4
            ),
            "page_first_html_vs_batch": harness.ratio(page["first_html_cold"]["median_ms"], page["baseline_batch"]["median_ms"]),
        },
        goals={
            "thumbnail_cold_ms": _met(thumbs["cold_request"]["median_ms"], GOALS_MS["thumbnail_cold"]),
            "thumbnail_cached_ms": _met(thumbs["cached_request"]["median_ms"], GOALS_MS["thumbnail_cached"]),
            "frame_cold_ms": _met(middle["request_cold"]["median_ms"], GOALS_MS["frame_cold"]),
            "page_first_html_ms": _met(page["first_html_cold"]["median_ms"], GOALS_MS["page_first_html"]),
            "page_all_crops_loaded_ms": _met(browser_ms, GOALS_MS["page_browser"]),
        },
        notes=[
            (
                "Requests are answered in-process through ASGI (no sockets), each app started first as a server starts it "
                "(its lifespan: templates loaded, routes prepared), untimed; the browser figure uses a real server."
            ),
            (
                "page_first_html_ms is the median of 6 first requests of the step/rank page, each to a new app (steps 0 and 1 "
                "alternate; the run's row groups are in the process-wide row-group cache, as for the baseline batch)."
            ),
            "frame_cold_ms is a request to a fresh app (decode one frame + JPEG); decode_seek is the decoder alone.",
            "Quick mode uses a 10 s 640x360 clip instead of 60 s 720p.",
        ],
    )
