#!/usr/bin/env python3
"""NVIDIA DALI's CPU pipeline on an image folder, the other peer of tandem's image pipeline:
readers.file -> decoders.image(device='cpu') -> random_resized_crop -> crop_mirror_normalize
(random mirror, ImageNet mean/std, CHW float), num_threads CPU threads, no GPU (device_id=None).

usage: dali_folder.py FOLDER [num_threads] [size] [batch] [batches]
Prints: dali_folder threads T size S img_per_s X, or "dali_folder error: ..." when DALI cannot run.
"""
import sys
import time


def main():
    folder = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 224
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    batches = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    try:
        import nvidia.dali as dali
        import nvidia.dali.fn as fn
        import nvidia.dali.types as types

        @dali.pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=folder, random_shuffle=True, name="reader")
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.random_resized_crop(images, size=[size, size])
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                              mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                              std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                              mirror=fn.random.coin_flip())
            return images, labels

        p = pipe()
        p.build()
        p.run()  # warm-up
        t0 = time.perf_counter()
        for _ in range(batches):
            p.run()
        dt = time.perf_counter() - t0
        print(f"dali_folder threads {threads} size {size} img_per_s {batch * batches / dt:.1f} (DALI {dali.__version__})")
    except Exception as e:  # DALI missing, or refusing to run without a GPU: say so, one line
        msg = " ".join(str(e).split())[:300]
        print(f"dali_folder error: {type(e).__name__}: {msg}")


if __name__ == "__main__":
    main()
