#!/usr/bin/env bash
# Build the verl-swe base image with no registry: debootstrap a Debian rootfs, `docker import` it,
# then add Python wheels that were downloaded on the host (installed with --no-index inside).
# Usage: envs/base/build.sh [IMAGE]   (env: SUITE, MIRROR, DEBIAN_IMAGE, PIP_PACKAGES, FORCE=1 to rebuild,
#                                     PLAN_ONLY=1 to print where the rootfs would come from)
set -euo pipefail

IMAGE=${1:-verl-swe/base:bookworm}
SUITE=${SUITE:-bookworm}
PIP_PACKAGES=${PIP_PACKAGES:-pytest}
DEB_PACKAGES=python3,python3-pip,python3-venv,git,procps,patch,ca-certificates

if [[ -z "${FORCE:-}${PLAN_ONLY:-}" ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE already built (FORCE=1 rebuilds)"
  exit 0
fi

# Where the Debian rootfs comes from. MIRROR, when set. Else on a Debian host the mirror it already uses (a
# deb822 .sources file or a classic sources.list), so air-gapped clusters with an internal mirror need no
# change. Else (Ubuntu: its mirror serves no Debian suite) Debian's own image, pulled from the registry the
# engine uses (DEBIAN_IMAGE), with the packages installed by its apt: nothing of the host's mirror is used.
mirror_from_apt() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
  if [[ -z "$uri" ]]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
  fi
  echo "$uri"
}
HOST_ID=$(. "${OS_RELEASE:-/etc/os-release}" 2>/dev/null; echo "${ID:-unknown}")
DEBIAN_IMAGE=${DEBIAN_IMAGE:-debian:$SUITE-slim}
if [[ -z "${MIRROR:-}" && "$HOST_ID" == debian ]]; then
  MIRROR=$(mirror_from_apt)
fi
SOURCE=debootstrap; [[ -n "${MIRROR:-}" ]] || SOURCE=image
if [[ -n "${PLAN_ONLY:-}" ]]; then
  echo "host=$HOST_ID source=$SOURCE mirror=${MIRROR:-} image=$([[ $SOURCE == image ]] && echo "$DEBIAN_IMAGE")"
  exit 0
fi

WORK=$(mktemp -d /tmp/verl-swe-base.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

if [[ $SOURCE == debootstrap ]]; then
  command -v debootstrap >/dev/null || { echo "envs/base/build.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
  KEYRING=()  # a non-Debian host verifies Debian's suite with Debian's keyring (package debian-archive-keyring)
  [[ "$HOST_ID" != debian && -e /usr/share/keyrings/debian-archive-keyring.gpg ]] && \
    KEYRING=(--keyring /usr/share/keyrings/debian-archive-keyring.gpg)
  echo "[1/3] debootstrap $SUITE from $MIRROR"
  debootstrap "${KEYRING[@]}" --variant=minbase --include="$DEB_PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || { tail -n 30 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

  echo "[2/3] docker import"
  tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV LANG=C.UTF-8 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1' \
    --change 'CMD ["sleep", "infinity"]' - "$IMAGE-rootfs" >/dev/null
else
  echo "[1/3] $HOST_ID host: Debian's own image $DEBIAN_IMAGE (no Debian mirror here; MIRROR= uses one)"
  docker pull -q "$DEBIAN_IMAGE" >/dev/null || {
    echo "envs/base/build.sh: could not pull $DEBIAN_IMAGE and no Debian mirror is set: set MIRROR=<a Debian" \
         "mirror> (debootstrap) or DEBIAN_IMAGE=<an image of Debian $SUITE the engine has>" >&2; exit 2; }
  echo "[2/3] apt-get install inside it: ${DEB_PACKAGES//,/ }"
  mkdir -p "$WORK/rootfs-ctx"
  cat >"$WORK/rootfs-ctx/Dockerfile" <<DOCKERFILE
FROM $DEBIAN_IMAGE
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${DEB_PACKAGES//,/ } \
    && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
CMD ["sleep", "infinity"]
DOCKERFILE
  docker build -q -t "$IMAGE-rootfs" "$WORK/rootfs-ctx" >/dev/null
fi

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
