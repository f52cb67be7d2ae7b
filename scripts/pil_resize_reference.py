#!/usr/bin/env python3
"""scripts/pil_resize_reference.py: the reference values of data.resize = bilinear, from Pillow.

Resizes Fashion-MNIST training images 28x28 -> 32x32 the way the AdaPT reference code's
torchvision Resize((32, 32)) does on a PIL "L" image (Image.resize((32, 32), BILINEAR)), and
prints what tests/test_data.c (test_fashion_mnist_bilinear_pil) asserts of adapt-sim's loader:
the byte sum of image 0 and of the first 100 images, their FNV-1a 64 hash, and the mean of
image 0 after ToTensor and Normalize((0.1307,), (0.3081,)) in float32.

    scripts/pil_resize_reference.py [FOLDER]                  # print the reference values
    scripts/pil_resize_reference.py [FOLDER] --compare FILE   # and compare with FILE

FOLDER holds train-images-idx3-ubyte.gz (default /usr/share/datasets/fashion-mnist). FILE is
raw uint8 images (n, 32, 32), e.g. adapt_dataset_load_resized's images written out; every one
of its images is compared with Pillow's, byte for byte. Needs numpy and Pillow (python3-pil).
"""
import gzip
import sys

import numpy as np
from PIL import Image


def images(folder):
    with gzip.open(folder + "/train-images-idx3-ubyte.gz") as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 28, 28)


def pil_resize(img):
    return np.asarray(Image.fromarray(img, mode="L").resize((32, 32), Image.BILINEAR))


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main(argv):
    folder = "/usr/share/datasets/fashion-mnist"
    compare = None
    args = list(argv)
    if "--compare" in args:
        i = args.index("--compare")
        compare = args[i + 1]
        del args[i:i + 2]
    if args:
        folder = args[0]
    src = images(folder)
    first = np.stack([pil_resize(src[i]) for i in range(100)])
    x = (first[0].astype(np.float32) / np.float32(255) - np.float32(0.1307)) / np.float32(0.3081)
    print("Pillow", Image.__version__ if hasattr(Image, "__version__") else "")
    print("image 0 byte sum", int(first[0].astype(np.int64).sum()))
    print("100 images byte sum", int(first.astype(np.int64).sum()))
    print("100 images FNV-1a 64 0x%016x" % fnv1a64(first.tobytes()))
    print("image 0 normalised mean %.9f" % x.astype(np.float64).mean())
    if compare:
        got = np.fromfile(compare, np.uint8).reshape(-1, 32, 32)
        bad = [i for i in range(len(got)) if not np.array_equal(got[i], pil_resize(src[i]))]
        print("%d of %d images equal Pillow's" % (len(got) - len(bad), len(got)))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
