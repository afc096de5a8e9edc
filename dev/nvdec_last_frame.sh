#!/usr/bin/env bash
# Reproduce "NVDEC takeover loses the last frame" on the GPU machine: clips built like the two
# real ones that lost it (H.264 High, B-pyramid, ending on a P frame after B-frames, mp4 time
# bases 1/10240 and 1/15360, full range), decoded by software and h264_cuvid exactly as
# srgpu's reader does; prints frame counts and the last timestamps of each, then runs srgpu.
# Usage (GPU machine): source .ffmpeg9/setup.sh; bash dev/nvdec_last_frame.sh /tmp/nv
set -u
out=${1:-/tmp/nvdec-last}; mkdir -p "$out"; FF=${FF:-ffmpeg}
clip() { # name fps frames timescale pix_fmt codec extra...
  local name=$1 fps=$2 n=$3 ts=$4 pf=$5 codec=$6; shift 6
  "$FF" -v error -y -f lavfi -i "testsrc2=size=1280x720:rate=$fps,noise=alls=12:allf=t" -frames:v "$n" \
    -c:v "$codec" -pix_fmt "$pf" "$@" -video_track_timescale "$ts" "$out/$name.mp4"
}
clip b20_30 20 30 10240 yuvj420p libx264 -profile:v high -bf 3 -b_strategy 2 -x264-params b-pyramid=normal
clip b30_280 30 280 15360 yuvj420p libx264 -profile:v high -bf 3 -x264-params b-pyramid=normal
clip b25_20 25 20 12800 yuv420p libx264 -profile:v high -bf 3 -x264-params b-pyramid=normal
clip b30_14 30 14 15360 yuv420p libx264 -profile:v high -bf 2
clip h8_30 30 30 15360 yuv420p libx265 -x265-params log-level=error:bframes=4
clip h10_30 25 30 12800 yuv420p10le libx265 -x265-params log-level=error:bframes=4
[ -n "${CLIPS:-}" ] && cp "$CLIPS"/*.mp4 "$out"/
for f in "$out"/*.mp4; do
  pf=$("$FF" -hide_banner -i "$f" 2>&1 | grep -o 'yuvj420p\|yuv420p10le\|yuv420p' | head -1)
  [ "$pf" = yuv420p10le ] || true
  dec=h264_cuvid; case $f in */h*) dec=hevc_cuvid;; esac
  for d in sw $dec; do
    opts=(); [ $d != sw ] && opts=(-c:0 $d -gpu:0 0)
    "$FF" -nostdin -hide_banner -nostats -loglevel level+info -copyts -noautorotate "${opts[@]}" -i "$f" -map 0:0 \
      -vf showinfo=checksum=0 -fps_mode passthrough -enc_time_base:v demux -f rawvideo -pix_fmt "$pf" -y /dev/null \
      2> "$out/$(basename $f .mp4).$d.log"
    n=$(grep -c 'Parsed_showinfo.*n: *[0-9]' "$out/$(basename $f .mp4).$d.log")
    last=$(grep -o 'n: *[0-9]* *pts: *[0-9-]*' "$out/$(basename $f .mp4).$d.log" | tail -2 | tr -s ' ' | tr '\n' ';')
    echo "$(basename $f) $d frames=$n last: $last"
    grep -o "n: *[0-9]* *pts: *[0-9-]* *pts_time:[0-9.]* *duration: *[0-9-]*" "$out/$(basename $f .mp4).$d.log" | tail -2 | sed "s/^/   /"
  done
  "$FF" -v error -i "$f" -map 0:v -c copy -f framecrc - | grep -v '^#' | tail -3 | sed 's/^/   pkt /'
done
# srgpu itself, CLI defaults (--hwdec auto): frames in the output file against the source's
for f in "$out"/*.mp4; do
  for rep in 1 2; do
    o="$out/$(basename $f .mp4).up$rep.${EXT:-mkv}"
    line=$(python3 -m srgpu upscale "$f" -o "$o" --overwrite ${SRGPU_ARGS:---codec ffv1} 2>&1 | grep -E "wrote|error|note|device" | tr "\n" " ")
    pkts=$("$FF" -v error -i "$o" -map 0:v -c copy -f framecrc - 2>/dev/null | grep -vc '^#')
    src=$("$FF" -v error -i "$f" -map 0:v -c copy -f framecrc - | grep -vc '^#')
    echo "srgpu $(basename $f) run $rep: source $src frames, output $pkts frames; $line"
  done
done
