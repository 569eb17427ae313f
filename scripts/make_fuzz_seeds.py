#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ from the layouts in the project's readers and the
image fixtures in tests/data/fixtures/images/. Idempotent; run from the repository root."""
import gzip
import json
import os
import shutil
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def idx(dtype, shape, payload):
    return struct.pack(">BBBB", 0, 0, dtype, len(shape)) + b"".join(struct.pack(">I", s) for s in shape) + payload


def tokens(ids, vocab, width):
    payload = b"".join(struct.pack("<H" if width == 2 else "<I", i) for i in ids)
    h = bytearray(64)
    h[0:8] = b"TNDMTOKS"
    struct.pack_into("<IIIIQI", h, 8, 1, 64, vocab, width, len(ids), zlib.crc32(payload))
    struct.pack_into("<I", h, 60, zlib.crc32(bytes(h[:60])))
    return bytes(h) + payload


def packed(dims, classes, records):
    """records: [(bytes, label, encoding)]; returns the fuzz input (u32 manifest length,
    manifest, shard)."""
    h = bytearray(64)
    h[0:8] = b"TNDMPACK"
    struct.pack_into("<IIIIII", h, 8, 1, 64, dims[0], dims[1], dims[2], len(classes))
    struct.pack_into("<I", h, 60, zlib.crc32(bytes(h[:60])))
    body, index, offset = b"", b"", 64
    for data, label, enc in records:
        index += struct.pack("<QIIIB3x", offset, len(data), zlib.crc32(data), label, enc)
        body += data
        offset += len(data)
    footer = bytearray(32)
    struct.pack_into("<QQI", footer, 0, len(records), offset, zlib.crc32(index))
    struct.pack_into("<I", footer, 20, zlib.crc32(bytes(footer[:20])))
    footer[24:32] = b"TNDMEND\0"
    shard = bytes(h) + body + index + bytes(footer)
    manifest = json.dumps({
        "format": "tandem-packed", "version": 1, "dims": list(dims), "classes": classes,
        "splits": {"train": {"records": len(records), "shards": [
            {"file": "train-00000.tpk", "bytes": len(shard), "records": len(records),
             "index_crc": zlib.crc32(index)}]}}}).encode()
    return struct.pack("<I", len(manifest)) + manifest + shard


def checkpoint():
    """A tandem checkpoint: one f32 tensor, its CRC-32 and a state with one epoch."""
    data = struct.pack("<ff", 0.25, -2.0)
    state = {"global_step": 1, "epochs": [{"epoch": 1, "train_loss": 0.5, "train_accuracy": 0.75,
                                          "test_loss": 0.625, "test_accuracy": 0.5, "images_per_s": 100.0,
                                          "seconds": 2.0, "lr": 0.1, "pinned_peak_bytes": 4096}]}
    meta = {"format": "tandem-checkpoint", "format_version": "1", "state": json.dumps(state),
            "crc32": json.dumps({"fc.bias": str(zlib.crc32(data))})}
    header = json.dumps({"__metadata__": meta,
                         "fc.bias": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return struct.pack("<Q", len(header)) + header + data


def gray_png(w, h, value):
    """A w x h 8-bit grayscale PNG, every pixel `value`."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\0" + bytes([value]) * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def http(method, path, body=b"", headers=()):
    """One HTTP/1.1 request with a Content-Length body."""
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"] + list(headers)
    if body or method == "POST":
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def http_seeds():
    png = gray_png(28, 28, 128)
    pixels = json.dumps([[[(x * 9 + y) % 256 for x in range(28)] for y in range(28)]]).encode()
    put("http", "get_healthz", http("GET", "/healthz"))
    put("http", "get_pipelined", http("GET", "/readyz") + http("GET", "/v1/model") + http("GET", "/metrics") +
        http("HEAD", "/healthz") + http("DELETE", "/v1/predict") + http("GET", "/nowhere"))
    put("http", "predict_png", http("POST", "/v1/predict?top_k=3", png, ["Content-Type: image/png"]))
    put("http", "predict_json", http("POST", "/v1/predict", pixels, ["Content-Type: application/json"]))
    put("http", "predict_json_batch", http("POST", "/v1/predict", b"[" + pixels + b"," + pixels + b"]",
                                           ["Content-Type: application/json"]))
    boundary = b"tandemBoundary7"
    parts = b"".join(b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"image%d\"; filename=\"%d.png\"\r\n"
                     b"Content-Type: image/png\r\n\r\n" % (i, i) + gray_png(28, 28, 40 * i) + b"\r\n"
                     for i in range(2)) + b"--" + boundary + b"--\r\n"
    put("http", "predict_multipart", http("POST", "/v1/predict", parts,
                                          ["Content-Type: multipart/form-data; boundary=" + boundary.decode()]))
    chunked = b"%x\r\n" % len(png) + png + b"\r\n0\r\n\r\n"
    put("http", "predict_chunked", ("POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: image/png\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n").encode() + chunked)
    put("http", "samples_json", http("POST", "/v1/samples",
                                     b'{"samples": [{"label": 3, "pixels": ' + pixels + b"}]}",
                                     ["Content-Type: application/json"]))
    put("http", "samples_png", http("POST", "/v1/samples?label=7", png, ["Content-Type: image/png"]))
    put("http", "expect_continue", http("POST", "/v1/predict", png, ["Content-Type: image/png",
                                                                     "Expect: 100-continue"]))


def cli_seeds():
    run = (b'model = "mlp"\nepochs = 2\nbatch_size = 64\nlr = 0.004\noptimizer = "adamw"\n'
           b'num_workers = "auto"\nmean = [0.2860]\nstd = [0.3530]\nno_augment = false\n')
    put("cli", "run_file", run)
    put("cli", "flags_and_run_file", b"--device\nvirt:0?speed=2&bw=12\n--num-workers\n2\n--seed\n7\0" + run)
    put("cli", "checkpoint_flags", b"--checkpoint-dir\nckpt\n--checkpoint-every\n10\n--resume\0epochs = 1\n")
    put("cli", "gpt_run_file", b'model = "gpt-mini"\nn_layer = 2\nn_head = 2\nn_embd = 64\nblock_size = 32\n'
        b'vocab_size = 512\ninit_exclude = ["wte."]\n')
    put("cli", "serve_flags", b"--serve\n127.0.0.1:0\n--publish-every\n4\n--online-mix\n0.25\n--max-body-mb\n2\0")


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    put("idx", "images_u8", idx(0x08, [2, 3, 3], bytes(range(18))))
    put("idx", "labels_u8", idx(0x08, [4], bytes([0, 1, 2, 9])))
    put("idx", "images_f32", idx(0x0D, [1, 2], struct.pack(">ff", 0.5, -1.0)))
    put("idx", "images_gz", gzip.compress(idx(0x08, [1, 2, 2], bytes([1, 2, 3, 4])), mtime=0))
    put("cifar", "one_record", bytes([3]) + bytes((i * 7) % 256 for i in range(3072)))
    put("cifar", "cifar100_record", bytes([1, 42]) + bytes((i * 3) % 256 for i in range(3072)))
    images = os.path.join(ROOT, "tests", "data", "fixtures", "images")
    for name in sorted(os.listdir(images)):
        if name.endswith((".jpg", ".png")):
            with open(os.path.join(images, name), "rb") as f:
                put("image", name, f.read())
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "fc.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                         "fc.bias": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}}).encode()
    put("safetensors", "two_tensors", struct.pack("<Q", len(header)) + header +
        struct.pack("<ffff", 1, 2, 3, 4) + bytes([0x80, 0x3f, 0, 0x40]))
    put("token_shard", "u16", tokens([1, 5, 7, 2, 0], 10, 2))
    put("token_shard", "u32", tokens([70000, 3], 70001, 4))
    put("packed", "raw_2x2", packed([1, 2, 2], ["a", "b"], [(bytes([1, 2, 3, 4]), 0, 0), (bytes([5, 6, 7, 8]), 1, 0)]))
    # Reproducers of the defects fixed in 888eecb (regression tests: Packed.ManifestDimsOutOfRange*,
    # ImageCodecBomb.SmallJpegClaimingManyPixels*, ImageCodecWarnings.JunkBeforeTheFrame*).
    put("packed", "repro_dims_wrap_to_784", packed([16, 3610991507, 4150654891], ["a"], [(bytes(784), 0, 0)]))
    with open(os.path.join(images, "rgb_baseline.jpg"), "rb") as f:
        jpg = f.read()
    sof = jpg.index(b"\xff\xc0")
    put("image", "repro_small_jpeg_claims_13376x13376",
        jpg[:sof + 5] + struct.pack(">HH", 13376, 13376) + jpg[sof + 9:])
    with open(os.path.join(images, "gray.jpg"), "rb") as f:
        thumb = f.read()
    app1 = b"Exif\0\0" + thumb
    whole = jpg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpg[2:]
    sof = whole.index(b"\xff\xc0", 2 + 4 + len(app1))
    junk = whole[:sof] + bytes([1, 2, 3, 4, 5]) + whole[sof:]
    sos = junk.index(b"\xff\xda", sof)
    put("image", "repro_junk_before_sof_cut_scan", junk[:sos + 5 + (len(junk) - sos - 5) // 2])
    put("checkpoint", "step_1", checkpoint())
    for i, text in enumerate(["cpu", "cuda:1", "virt:0?speed=0.5&bw=12&latency_us=20", "virt:3?compute=none"]):
        put("device", "spec_%d" % i, text.encode())
    with open(os.path.join(images, "gray.png"), "rb") as f:
        png = f.read()
    put("packed", "encoded_png", packed([3, 0, 0], ["x"], [(png, 0, 2)]))
    http_seeds()
    cli_seeds()


if __name__ == "__main__":
    main()
