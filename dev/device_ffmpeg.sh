#!/usr/bin/env bash
# Run from the project root on your own machine: puts imageio-ffmpeg 0.8.1 (ffmpeg 9.0.2, with
# NVDEC decoders: what a fresh `pip install srgpu` gets) into .ffmpeg9/ (ignored by git) for the
# GPU machine, its ffmpeg binary xz-compressed (172 MB -> 48 MiB) to fit the 64 MiB a run carries.
# ../shared/device/prepare.sh fetches 0.6.0 (ffmpeg 7.0.2) instead, whose wheel fits as it is.
# Then name ".ffmpeg9" in carry and start every GPU-machine command with:
#   source .ffmpeg9/setup.sh;
# which installs it under /tmp/site, sets PYTHONPATH, and $FF to the ffmpeg binary. Run Python
# scripts from the project root (not from .ffmpeg9/, whose unpacked package has no binary).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
version=0.8.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$tmp" "imageio-ffmpeg==$version"
(cd "$tmp" && python3 -m zipfile -e imageio_ffmpeg-*.whl x)
binary=$(ls "$tmp"/x/imageio_ffmpeg/binaries/ffmpeg-linux-*)
rm -rf .ffmpeg9 && mkdir -p .ffmpeg9
xz -T0 -6 -c "$binary" > .ffmpeg9/ffmpeg.xz
rm "$binary"
cp -r "$tmp"/x/imageio_ffmpeg .ffmpeg9/
name=$(basename "$binary")
cat > .ffmpeg9/setup.sh <<TXT
# sourced on the GPU machine: imageio-ffmpeg $version from .ffmpeg9 into /tmp/site
mkdir -p /tmp/site && cp -r .ffmpeg9/imageio_ffmpeg /tmp/site/ && \\
xz -T4 -dc .ffmpeg9/ffmpeg.xz > /tmp/site/imageio_ffmpeg/binaries/$name && \\
chmod +x /tmp/site/imageio_ffmpeg/binaries/$name || exit 1
export PYTHONPATH=/tmp/site:\$PWD PYTHONUNBUFFERED=1
export FF=/tmp/site/imageio_ffmpeg/binaries/$name
TXT
du -sh .ffmpeg9
