#!/usr/bin/env bash
# A release's artifacts, without a container engine or a registry (make release VERSION=x.y.z).
#
#   hack/release.sh build VERSION   write dist/ for VERSION (semver, no leading v):
#     sealfleet-VERSION.tgz                        the Helm chart, its default images the ones below
#     sealfleet-operator_VERSION_linux_amd64.oci.tar     REGISTRY/sealfleet-operator:VERSION
#     sealfleet-sealer_VERSION_linux_amd64.oci.tar       REGISTRY/sealfleet-sealer:VERSION
#     sealfleet-sealer-gpu_VERSION_linux_amd64.oci.tar   REGISTRY/sealfleet-sealer-gpu:VERSION
#     kubectl-sealfleet_VERSION_OS_ARCH.tar.gz     the plugin for linux/amd64, linux/arm64, darwin/arm64
#     CHANGELOG-VERSION.md                         VERSION's section of CHANGELOG.md (refused without one)
#     SHA256SUMS                                   sha256sum of every other file
#   hack/release.sh check DIR       verify a dist/ directory (the build runs it before dist/ is replaced)
#
# REGISTRY (default ghcr.io/sealfleet) prefixes the images' names; DIST (default dist/) is where
# the build writes; PLUGIN_PLATFORMS (default "linux/amd64 linux/arm64 darwin/arm64") the plugin
# builds, and what check expects (the demo builds its release with REGISTRY=localhost and the
# host's platform only). The images are OCI archives
# (an OCI image layout, tarred) written by hack/tools/img/cmd/mkimage, holding what
# hack/images.sh puts in the local cluster's (hack/lib-images.sh): the operator's /manager and
# /node-agent (`make build`'s go build, once hack/check-build-contexts.sh has built them from the
# Dockerfile's context) with blkid and its libraries, and /sealer (`make sealer`: a build from a
# copy of sealer-image/Dockerfile's context) with the libraries it links; the GPU sealer adds
# the OpenCL ICD loader and NVIDIA's ICD entry as sealer-image/Dockerfile's gpu stage does. Each
# carries this machine's glibc and loader. Publishing (registry, chart repository, GitHub
# release) is .github/workflows/release.yaml's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
REGISTRY=${REGISTRY:-ghcr.io/sealfleet}
bin=$root/bin
helm=$bin/helm
read -ra plugin_platforms <<<"${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/arm64}"
DIST=${DIST:-$root/dist}
crd_dir=$root/config/crd/bases
log() { echo "release: $*" >&2; }
die() { log "$*"; exit 1; }
# gobuild, blkid_bin, operator_files, sealer_files: shared with hack/images.sh.
# shellcheck source=hack/lib-images.sh
source "$root/hack/lib-images.sh"

# check_version VERSION: semver (MAJOR.MINOR.PATCH[-PRERELEASE]) without a leading v; build
# metadata (+…) is refused, an image tag cannot hold it.
check_version() {
  local v=$1 n='(0|[1-9][0-9]*)' id='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
  [ -n "$v" ] || die "VERSION is required: make release VERSION=x.y.z (semver, no leading v)"
  [[ $v != v* ]] || die "VERSION '$v': give it without the leading v (${v#v}); the tag v${v#v} is the workflow's"
  [[ $v != *+* ]] || die "VERSION '$v': build metadata (+…) is not allowed: image tags cannot hold '+'"
  [[ $v =~ ^$n\.$n\.$n(-$id(\.$id)*)?$ ]] || die "VERSION '$v' is not semver MAJOR.MINOR.PATCH[-PRERELEASE] (e.g. 0.1.0, 1.2.0-rc.1)"
}

# changelog VERSION: VERSION's section of CHANGELOG.md, its heading included (link definitions
# left out); fails when it has none or it is empty.
changelog() {
  local section
  section=$(awk -v h="## [$1]" '
    /^## / { if (on) exit; on = ($0 == h || index($0, h " ") == 1) }
    on && !/^\[[^]]+\]: /' "$root/CHANGELOG.md")
  [ -n "$section" ] || die "CHANGELOG.md has no '## [$1]' section: add one (Keep a Changelog) before releasing $1"
  [ -n "$(sed 1d <<<"$section" | tr -d '[:space:]')" ] || die "CHANGELOG.md's '## [$1]' section is empty"
  printf '%s\n' "$section"
}

image_file() { echo "$1_$2_linux_amd64.oci.tar"; }   # NAME VERSION
plugin_file() { echo "kubectl-sealfleet_$1_${2%/*}_${2#*/}.tar.gz"; }   # VERSION OS/ARCH
license_file() { local f; for f in LICENSE LICENSE.md LICENSE.txt COPYING; do [ -f "$root/$f" ] && { echo "$f"; return; }; done; return 0; }

# opencl_loader: this machine's libOpenCL.so.1 (the ocl-icd-libopencl1 package).
opencl_loader() {
  local p
  p=$(ldconfig -p 2>/dev/null | awk '$1 == "libOpenCL.so.1" && /x86-64/ {print $NF; exit}')
  [ -n "$p" ] || p=$(dpkg -L ocl-icd-libopencl1 2>/dev/null | grep '/libOpenCL\.so\.1$' | head -n1 || true)
  [ -n "$p" ] && [ -e "$p" ] || die "libOpenCL.so.1 (Debian's ocl-icd-libopencl1) not found: run hack/host-deps.sh"
  echo "$p"
}

# tgz OUT DIR FILE...: a deterministic gzipped tar of DIR's FILEs (sorted, epoch times, root).
tgz() {
  local o=$1 d=$2; shift 2
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$d" -cf - "$@" | gzip -9 -n > "$o"
}

# timed STEP CMD...: run CMD and log the seconds it took.
timed() {
  local step=$1 t0=$SECONDS; shift
  "$@"
  log "$step: $((SECONDS - t0)) s"
}

# chart_copy DIR VERSION: charts/sealfleet copied to DIR/sealfleet with its default images the
# release's: in values.yaml image.repository and sealerImage.repository under REGISTRY and both
# tags VERSION, and the same four defaults in README.md's values table (helm-docs' rows, so
# `helm show readme` agrees with `helm show values`). Nothing else changes (helm package sets
# Chart.yaml's version and appVersion).
chart_copy() {
  local d=$1 v=$2
  rm -rf "$d" && mkdir -p "$d" && cp -a "$root/charts/sealfleet" "$d/sealfleet"
  awk -v op="$REGISTRY/sealfleet-operator" -v sealer="$REGISTRY/sealfleet-sealer" -v tag="$v" '
    /^[^ #]/ { blk = ($0 ~ /^image:/) ? "image" : ($0 ~ /^sealerImage:/) ? "sealerImage" : "" }
    blk != "" && /^  repository:/ { print "  repository: " (blk == "image" ? op : sealer); n[blk ".repository"]++; next }
    blk != "" && /^  tag:/ { print "  tag: \"" tag "\""; n[blk ".tag"]++; next }
    { print }
    END {
      split("image.repository image.tag sealerImage.repository sealerImage.tag", k, " ")
      for (i in k) if (n[k[i]] != 1) { print "values.yaml: " k[i] " set " n[k[i]] + 0 " times, want 1" > "/dev/stderr"; bad = 1 }
      exit bad
    }' "$root/charts/sealfleet/values.yaml" > "$d/values.yaml" || die "could not set the release images in the chart's values.yaml"
  mv "$d/values.yaml" "$d/sealfleet/values.yaml"
  local readme=$d/sealfleet/README.md
  if [ -f "$readme" ]; then
    awk -v op="$REGISTRY/sealfleet-operator" -v sealer="$REGISTRY/sealfleet-sealer" -v tag="$v" '
      function set(val) { if (sub(/`"[^`]*"`/, "`\"" val "\"`")) n++ }
      /^\| image\.repository \|/ { set(op) }
      /^\| image\.tag \|/ { set(tag) }
      /^\| sealerImage\.repository \|/ { set(sealer) }
      /^\| sealerImage\.tag \|/ { set(tag) }
      { print }
      END { if (n != 4) print "release: README.md: set " n + 0 " of the 4 image defaults in its values table (its rows changed?): the packaged README may name other defaults than values.yaml" > "/dev/stderr" }
    ' "$readme" > "$d/README.md"
    mv "$d/README.md" "$readme"
  fi
  local f
  for f in values.yaml README.md; do
    [ -f "$root/charts/sealfleet/$f" ] || continue
    diff -u "$root/charts/sealfleet/$f" "$d/sealfleet/$f" | grep '^[-+][^-+]' | sed "s/^/release: packaged chart's $f: /" >&2 || true
  done
}

build_tools() {
  gobuild "$root/hack/tools/img" "$bin" ./cmd/mkimage ./cmd/distcheck
  "$root/hack/tools.sh" helm
}

build_binaries() {
  # The operator image's context must build them (as `make test-hygiene` checks); the release's
  # binaries are `make build`'s (with the commit stamped from git).
  "$root/hack/check-build-contexts.sh" operator
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$work/bin/" ./cmd/manager ./cmd/node-agent)
  # `make sealer`: the sealer from a copy of exactly its image's build context.
  "$root/hack/check-build-contexts.sh" sealer
}

build_images() {
  local v=$1 d=$2 sealer=$root/sealer-image/target/release/sealer f blkid ocl
  [ -x "$sealer" ] || die "no sealer binary ($sealer) after hack/check-build-contexts.sh sealer"
  blkid=$(blkid_bin)
  local -a files=()
  while read -r f; do files+=("$f"); done < <(operator_files "$work/bin" "$blkid")
  "$bin/mkimage" -format oci-archive -o "$d/$(image_file sealfleet-operator "$v")" -tag "$REGISTRY/sealfleet-operator:$v" \
    -entrypoint /manager "${files[@]}"
  files=()
  while read -r f; do files+=("$f"); done < <(sealer_files "$sealer")
  "$bin/mkimage" -format oci-archive -o "$d/$(image_file sealfleet-sealer "$v")" -tag "$REGISTRY/sealfleet-sealer:$v" \
    -entrypoint /sealer "${files[@]}"
  # sealer-image/Dockerfile's gpu stage: the ICD loader (the sealer's GPU engine opens
  # libOpenCL.so.1 at run time), NVIDIA's ICD entry (the container toolkit mounts the driver's
  # libnvidia-opencl.so.1) and the stage's environment.
  ocl=$(opencl_loader)
  files=()
  while read -r f; do files+=("$f"); done < <(sealer_files "$sealer" "$ocl=$ocl:0644")
  "$bin/mkimage" -format oci-archive -o "$d/$(image_file sealfleet-sealer-gpu "$v")" -tag "$REGISTRY/sealfleet-sealer-gpu:$v" \
    -entrypoint /sealer -env FIL_PROOFS_PARENT_CACHE=/var/tmp/filecoin-parents -env NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    -text /etc/OpenCL/vendors/nvidia.icd=libnvidia-opencl.so.1 "${files[@]}"
}

build_chart() {
  local v=$1 d=$2
  chart_copy "$work/chart" "$v"
  "$helm" package "$work/chart/sealfleet" --version "$v" --app-version "$v" -d "$d" >/dev/null
}

build_plugins() {
  local v=$1 d=$2 p lic; lic=$(license_file)
  for p in "${plugin_platforms[@]}"; do
    local pd=$work/plugin/${p/\//_}; mkdir -p "$pd"
    (cd "$root" && CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -o "$pd/kubectl-sealfleet" ./cmd/kubectl-sealfleet)
    local entries=(kubectl-sealfleet)
    if [ -n "$lic" ]; then cp "$root/$lic" "$pd/LICENSE"; entries+=(LICENSE); fi
    tgz "$d/$(plugin_file "$v" "$p")" "$pd" "${entries[@]}"
  done
  [ -n "$lic" ] || log "the repository has no LICENSE file: the plugin tarballs hold the binary only"
}

sums() { (cd "$1" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs -d '\n' sha256sum > SHA256SUMS); }

build() {
  local v=${1:-}
  check_version "$v"
  local notes; notes=$(changelog "$v")
  [ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] || log "the work tree has uncommitted changes: $v is built from them"
  local t0=$SECONDS
  work=$root/_out/release
  out=$work   # gobuild stages there
  rm -rf "$work" && mkdir -p "$work/dist" "$work/bin"
  local d=$work/dist
  timed tools build_tools
  timed binaries build_binaries
  timed images build_images "$v" "$d"
  timed chart build_chart "$v" "$d"
  timed plugins build_plugins "$v" "$d"
  printf '%s\n' "$notes" > "$d/CHANGELOG-$v.md"
  sums "$d"
  timed check check "$d"
  mkdir -p "$(dirname "$DIST")" && rm -rf "$DIST" && mv "$d" "$DIST"
  (cd "$DIST" && du -b -- * | awk -v d="$DIST" '{printf "release: %12d  %s/%s\n", $1, d, $2}' >&2)
  log "$DIST holds $v ($(du -sh "$DIST" | cut -f1)) in $((SECONDS - t0)) s; verify it again with: hack/release.sh check $DIST"
}

# check DIR: SHA256SUMS holds every other file and matches; each image archive is a valid OCI
# layout of its REGISTRY/NAME:VERSION (distcheck); the chart's Chart.yaml says VERSION, it holds
# and renders the CRDs of config/crd/bases, and its default images are the release's; each plugin
# tarball holds an executable of its OS/ARCH (and LICENSE when the repository has one); the
# release notes are VERSION's section of CHANGELOG.md.
check() {
  local dir=${1:-}
  [ -d "$dir" ] || die "usage: hack/release.sh check DIR (a dist/ directory)"
  dir=$(cd "$dir" && pwd)
  (out=$(mktemp -d) && gobuild "$root/hack/tools/img" "$bin" ./cmd/distcheck && rmdir "$out")
  [ -x "$helm" ] || "$root/hack/tools.sh" helm
  local charts=("$dir"/sealfleet-*.tgz)
  [ ${#charts[@]} -eq 1 ] && [ -f "${charts[0]}" ] || die "$dir: want exactly one chart sealfleet-VERSION.tgz, found ${charts[*]##*/}"
  local v=${charts[0]##*/sealfleet-}; v=${v%.tgz}
  check_version "$v"
  log "checking $dir: version $v, images under $REGISTRY"

  # SHA256SUMS: every other file, sorted, each matching.
  [ -f "$dir/SHA256SUMS" ] || die "$dir has no SHA256SUMS"
  local listed present
  listed=$(awk '{print $2}' "$dir/SHA256SUMS")
  present=$(cd "$dir" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort)
  [ "$listed" = "$present" ] || die "SHA256SUMS lists (sorted) ${listed//$'\n'/ }, the directory holds ${present//$'\n'/ }"
  (cd "$dir" && sha256sum --strict --quiet -c SHA256SUMS) || die "SHA256SUMS does not match the files"
  log "SHA256SUMS: $(wc -l < "$dir/SHA256SUMS") files match"

  # Exactly the files a release has.
  local p f
  local -a want=("sealfleet-$v.tgz" "CHANGELOG-$v.md" SHA256SUMS)
  for f in sealfleet-operator sealfleet-sealer sealfleet-sealer-gpu; do want+=("$(image_file "$f" "$v")"); done
  for p in "${plugin_platforms[@]}"; do want+=("$(plugin_file "$v" "$p")"); done
  [ "$(printf '%s\n' "${want[@]}" | LC_ALL=C sort)" = "$(ls -A "$dir" | LC_ALL=C sort)" ] ||
    die "$dir holds $(ls -A "$dir" | tr '\n' ' '), want $(printf '%s ' "${want[@]}")"

  # Release notes.
  if [ -f "$root/CHANGELOG.md" ]; then
    cmp -s <(changelog "$v") "$dir/CHANGELOG-$v.md" || die "CHANGELOG-$v.md is not CHANGELOG.md's '## [$v]' section"
  else
    head -n1 "$dir/CHANGELOG-$v.md" | grep -q "^## \[$v\]" || die "CHANGELOG-$v.md does not start with '## [$v]'"
  fi

  # Images.
  local dc=$bin/distcheck
  "$dc" oci "$dir/$(image_file sealfleet-operator "$v")" "$REGISTRY/sealfleet-operator:$v" \
    /manager /node-agent /usr/sbin/blkid basename:libblkid.so.1 entrypoint:/manager >&2
  "$dc" oci "$dir/$(image_file sealfleet-sealer "$v")" "$REGISTRY/sealfleet-sealer:$v" \
    /sealer basename:libc.so.6 entrypoint:/sealer >&2
  "$dc" oci "$dir/$(image_file sealfleet-sealer-gpu "$v")" "$REGISTRY/sealfleet-sealer-gpu:$v" \
    /sealer basename:libc.so.6 basename:libOpenCL.so.1 text:/etc/OpenCL/vendors/nvidia.icd=libnvidia-opencl.so.1 \
    env:FIL_PROOFS_PARENT_CACHE=/var/tmp/filecoin-parents env:NVIDIA_DRIVER_CAPABILITIES=compute,utility entrypoint:/sealer >&2

  # The chart.
  local chart=${charts[0]} meta cv av
  meta=$("$helm" show chart "$chart")
  cv=$(awk '$1 == "version:" {gsub(/"/, "", $2); print $2}' <<<"$meta")
  av=$(awk '$1 == "appVersion:" {gsub(/"/, "", $2); print $2}' <<<"$meta")
  [ "$cv" = "$v" ] && [ "$av" = "$v" ] || die "${chart##*/}: Chart.yaml version '$cv', appVersion '$av', want $v"
  local listing rendered crd n=0 crds
  listing=$(tar -tzf "$chart")
  rendered=$("$helm" template sealfleet "$chart" -n sealfleet-system --kube-version 1.32.0)
  for crd in "$crd_dir"/*.yaml; do
    grep -qx "sealfleet/templates/crds/${crd##*/}" <<<"$listing" || die "${chart##*/} lacks templates/crds/${crd##*/}"
    local cname; cname=$(awk '/^metadata:/ {m = 1; next} m && /^  name:/ {print $2; exit}' "$crd")
    awk -v n="$cname" '/^kind: CustomResourceDefinition$/ {c = 1} /^---/ {c = 0} c && $1 == "name:" && $2 == n {f = 1} END {exit !f}' <<<"$rendered" ||
      die "${chart##*/} does not render the CRD $cname"
    n=$((n + 1))
  done
  crds=$(grep -c '^kind: CustomResourceDefinition$' <<<"$rendered" || true)
  [ "$n" -gt 0 ] && [ "$crds" = "$n" ] || die "${chart##*/} renders $crds CRDs, config/crd/bases has $n"
  local images wanted
  images=$(grep -oE '(image: *"?|-image=)[^" ]+' <<<"$rendered" | sed -E 's/^(image: *"?|-image=)//' | LC_ALL=C sort -u)
  wanted=$(printf '%s\n' "$REGISTRY/sealfleet-operator:$v" "$REGISTRY/sealfleet-sealer:$v" | LC_ALL=C sort)
  [ "$images" = "$wanted" ] || die "${chart##*/} renders the images ${images//$'\n'/ } by default, want ${wanted//$'\n'/ }"
  log "${chart##*/}: version and appVersion $v, $n CRDs, default images ${images//$'\n'/ }"

  # The plugin.
  local lic; lic=$(license_file)
  for p in "${plugin_platforms[@]}"; do
    f=$dir/$(plugin_file "$v" "$p")
    "$dc" exec "$f" "$p" kubectl-sealfleet >&2
    [ -z "$lic" ] || tar -tzf "$f" | grep -qx LICENSE || die "${f##*/} has no LICENSE"
  done
  log "$dir: release $v checked"
}

case "${1:-}" in
  build) build "${2:-}" ;;
  check) check "${2:-}" ;;
  *) echo "usage: hack/release.sh build VERSION | check DIR" >&2; exit 2 ;;
esac
