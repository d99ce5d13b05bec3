#!/bin/sh
# Installs the Debian/Ubuntu packages the build and tests need, when missing.
# FreeBSD: pkg install vulkan-loader vulkan-headers glslang spirv-tools elixir erlang
#          mesa-devel (lavapipe) gmake
set -eu
pkgs="build-essential libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools elixir erlang-dev erlang-nox"
[ -n "${NXV_EXTRA_PKGS:-}" ] && pkgs="$pkgs $NXV_EXTRA_PKGS"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "install_deps: all packages present"
  exit 0
fi
echo "install_deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
