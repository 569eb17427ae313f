#!/usr/bin/env python3
"""Writes the image-codec test fixtures into tests/data/fixtures/images/ (a few KB in all).

Run with a Python that has Pillow and NumPy (e.g. /opt/peers/bin/python); the build and the
tests never run it. Every image is 24x16 (the interlaced PNG 13x11), made by formulas, so
the script is deterministic. JPEG fixtures are encoded by Pillow, except the YCCK one, which
Pillow cannot write: it goes through TurboJPEG's tjCompress2 (libturbojpeg.so.0, via
ctypes), which compresses packed CMYK into YCCK with an Adobe marker. 16-bit and interlaced
PNGs are written by hand (zlib + CRC), as Pillow writes neither.

reference.bin holds what Pillow decodes each valid fixture to, as RGB u8 [H, W, 3]:
  a line "tandem-image-reference 1 <count>\\n", then per image a line "<name> <width>
  <height>\\n" followed by width * height * 3 bytes.
"""
import ctypes
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures", "images")
W, H = 24, 16


def rgb_pattern(w=W, h=H):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 40 + 180 * x / (w - 1)
    g = 30 + 190 * y / (h - 1)
    b = 128 + 100 * np.sin(x / 3.0) * np.cos(y / 4.0)
    img = np.stack([r, g, b], axis=-1)
    img[4:9, 5:11] = (230, 40, 60)  # a flat red block with sharp edges
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def cmyk_pattern():
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    c = 20 + 200 * x / (W - 1)
    m = 200 - 180 * y / (H - 1)
    ye = 60 + 60 * np.cos(x / 4.0)
    k = 10 + 90 * (x + y) / (W + H - 2)
    return np.clip(np.rint(np.stack([c, m, ye, k], axis=-1)), 0, 255).astype(np.uint8)


def pil_bytes(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_by_hand(pixels, bit_depth, color_type, interlaced=False):
    """pixels: [H, W, C] uint8 or uint16 (big-endian in the file); filter 0 on every row."""
    h, w = pixels.shape[:2]
    raw = pixels.astype(">u2").tobytes() if bit_depth == 16 else pixels.astype(np.uint8).tobytes()
    row_bytes = len(raw) // h
    if not interlaced:
        scan = b"".join(b"\0" + raw[i * row_bytes:(i + 1) * row_bytes] for i in range(h))
    else:  # Adam7 passes: (x0, y0, dx, dy)
        scan = b""
        for x0, y0, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]:
            sub = pixels[y0::dy, x0::dx]
            if sub.size == 0:
                continue
            b = sub.astype(">u2").tobytes() if bit_depth == 16 else sub.astype(np.uint8).tobytes()
            rb = len(b) // sub.shape[0]
            scan += b"".join(b"\0" + b[i * rb:(i + 1) * rb] for i in range(sub.shape[0]))
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlaced else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(scan, 9)) +
            png_chunk(b"IEND", b""))


def ycck_by_turbojpeg(cmyk_stored, quality=90):
    """TurboJPEG compresses packed CMYK (TJPF_CMYK = 11) into a YCCK JPEG with an Adobe marker."""
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjCompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong), ctypes.c_int,
                               ctypes.c_int, ctypes.c_int]
    tj.tjFree.argtypes = [ctypes.c_void_p]
    tj.tjDestroy.argtypes = [ctypes.c_void_p]
    handle = tj.tjInitCompress()
    buf, size = ctypes.c_void_p(), ctypes.c_ulong()
    h, w = cmyk_stored.shape[:2]
    rc = tj.tjCompress2(handle, cmyk_stored.tobytes(), w, 0, h, 11, ctypes.byref(buf), ctypes.byref(size), 0, quality,
                        4096)  # TJSAMP_444, TJFLAG_ACCURATEDCT
    assert rc == 0, "tjCompress2 failed"
    data = ctypes.string_at(buf, size.value)
    tj.tjFree(buf)
    tj.tjDestroy(handle)
    return data


def cut_in_scan(jpeg):
    """The JPEG cut halfway through its entropy-coded data: the header is whole."""
    sos = jpeg.index(b"\xff\xda")
    return jpeg[:sos + (len(jpeg) - sos) // 2]


def zero_height_jpeg(jpeg):
    """The same JPEG with the height in its SOF0 segment set to 0."""
    i = jpeg.index(b"\xff\xc0")
    return jpeg[:i + 5] + b"\0\0" + jpeg[i + 7:]


def main():
    os.makedirs(OUT, exist_ok=True)
    rgb = rgb_pattern()
    rgb_img = Image.fromarray(rgb, "RGB")
    files = {
        "rgb_baseline.jpg": pil_bytes(rgb_img, "JPEG", quality=90),
        "rgb_progressive.jpg": pil_bytes(rgb_img, "JPEG", quality=90, progressive=True),
        "gray.jpg": pil_bytes(rgb_img.convert("L"), "JPEG", quality=90),
        # Pillow writes CMYK with an Adobe marker and inverted values, as Photoshop does.
        "cmyk_adobe.jpg": pil_bytes(Image.fromarray(cmyk_pattern(), "CMYK"), "JPEG", quality=90),
        # Stored inverted (Adobe convention), so every decoder reads the same ink as cmyk_adobe.jpg.
        "ycck.jpg": ycck_by_turbojpeg(255 - cmyk_pattern()),
        "rgb.png": pil_bytes(rgb_img, "PNG"),
        "rgba.png": pil_bytes(Image.fromarray(np.dstack([rgb, (np.arange(W * H) * 7 % 256).reshape(H, W)]).astype(np.uint8), "RGBA"), "PNG"),
        "palette.png": pil_bytes(rgb_img.quantize(colors=16, dither=Image.Dither.NONE), "PNG", transparency=3),
        "gray.png": pil_bytes(rgb_img.convert("L"), "PNG"),
        # High byte the pattern, low byte varying: a decoder must keep the high byte.
        "rgb16.png": png_by_hand(rgb.astype(np.uint16) * 256 + (np.arange(W * H * 3) * 37 % 256).reshape(H, W, 3), 16, 2),
        "interlaced.png": png_by_hand(rgb_pattern(13, 11), 8, 2, interlaced=True),
    }
    bad = {
        "truncated.jpg": cut_in_scan(files["rgb_baseline.jpg"]),
        "truncated.png": files["rgb.png"][: len(files["rgb.png"]) * 2 // 3],
        "zero_height.jpg": zero_height_jpeg(files["rgb_baseline.jpg"]),
        "zero_width.png": b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 0, H, 8, 2, 0, 0, 0)) +
                          png_chunk(b"IEND", b""),
        "not_an_image.jpg": b"This is a text file that only has a .jpg name.\n",
    }
    ref = []
    for name, data in files.items():
        decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        ref.append((name, decoded))
    # The hand-written 16-bit PNG: Pillow keeps the high byte of each sample.
    assert (ref[list(files).index("rgb16.png")][1] == rgb).all()
    for name, data in {**files, **bad}.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    with open(os.path.join(OUT, "reference.bin"), "wb") as f:
        f.write(f"tandem-image-reference 1 {len(ref)}\n".encode())
        for name, px in ref:
            f.write(f"{name} {px.shape[1]} {px.shape[0]}\n".encode())
            f.write(np.ascontiguousarray(px, dtype=np.uint8).tobytes())
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {len(files) + len(bad) + 1} files, {total} bytes, into {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
