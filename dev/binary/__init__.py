"""The binarized SRCNN of issue 20 (the XOR + popcount method of CN106779057B), built, trained and
measured, and not offered: the engines do not run it, so it lives here, beside the product, not in
it (issue 41). ``kernels`` (with ``binary.cu``) the binary convolution and its NumPy reference,
``model`` the network, its .npz format and CPU forward; ``bench_binary.py`` and ``eval_binary.py``
its measurements; its tests are dev/tests/test_binary_*.py and test_gpu_binary.py;
scripts/training/train.py --binary conv2 trains it. Import as ``dev.binary`` with the checkout's
root on sys.path."""
