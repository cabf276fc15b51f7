#!/usr/bin/env bash
# Build the verl-swe base image with no registry: debootstrap a Debian rootfs, `docker import` it,
# then add Python wheels that were downloaded on the host (installed with --no-index inside).
# Usage: envs/base/build.sh [IMAGE]   (env: SUITE, MIRROR, PIP_PACKAGES, FORCE=1 to rebuild)
set -euo pipefail

IMAGE=${1:-verl-swe/base:bookworm}
SUITE=${SUITE:-bookworm}
PIP_PACKAGES=${PIP_PACKAGES:-pytest}
DEB_PACKAGES=python3,python3-pip,python3-venv,git,procps,patch,ca-certificates

if [[ -z "${FORCE:-}" ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE already built (FORCE=1 rebuilds)"
  exit 0
fi

# The Debian mirror this host already uses (a deb822 .sources file or a classic sources.list),
# so air-gapped clusters with an internal mirror need no change here.
mirror_from_apt() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
  if [[ -z "$uri" ]]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
  fi
  echo "$uri"
}
MIRROR=${MIRROR:-$(mirror_from_apt)}
[[ -n "$MIRROR" ]] || { echo "envs/base/build.sh: no Debian mirror found in /etc/apt; set MIRROR=" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "envs/base/build.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/verl-swe-base.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

echo "[1/3] debootstrap $SUITE from $MIRROR"
debootstrap --variant=minbase --include="$DEB_PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -n 30 "$WORK/debootstrap.log" >&2; exit 1; }
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

echo "[2/3] docker import"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1' \
  --change 'CMD ["sleep", "infinity"]' - "$IMAGE-rootfs" >/dev/null

echo "[3/3] wheels downloaded on the host: $PIP_PACKAGES"
mkdir -p "$WORK/ctx/wheels"
# The image has Debian's Python; ask pip for wheels that fit it, not the host's interpreter.
PYVER=$(docker run --rm --network none "$IMAGE-rootfs" python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
python3 -m pip download -q --only-binary=:all: --python-version "$PYVER" -d "$WORK/ctx/wheels" $PIP_PACKAGES
cat >"$WORK/ctx/Dockerfile" <<DOCKERFILE
FROM $IMAGE-rootfs
COPY wheels /tmp/wheels
RUN python3 -m pip install --no-index --find-links /tmp/wheels --break-system-packages $PIP_PACKAGES && rm -rf /tmp/wheels
DOCKERFILE
docker build -q --network none -t "$IMAGE" "$WORK/ctx" >/dev/null
docker image rm "$IMAGE-rootfs" >/dev/null
echo "built $IMAGE"
