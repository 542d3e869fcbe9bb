#!/usr/bin/env bash
# Make sure the external tools used by the integration-test harness are present.
#
# Installs the Debian packages prometheus and prometheus-alertmanager when missing (idempotent;
# `apt-get update` runs only when a package has no install candidate or the install fails),
# then checks gcloud with its Pub/Sub and Firestore emulator components and java, which cannot
# be installed from Debian's archive. Exits non-zero with a clear message when anything is
# missing.
set -euo pipefail

log() { printf 'ensure_tools: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

export DEBIAN_FRONTEND=noninteractive
apt_updated=0

apt_update_once() {
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        apt_updated=1
    fi
}

has_candidate() {
    local candidate
    candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

apt_install() {
    [ "$(id -u)" -eq 0 ] || die "packages missing ($*) and not running as root; install them"
    local pkg
    for pkg in "$@"; do
        has_candidate "$pkg" || apt_update_once
    done
    log "apt-get install -y $*"
    if ! apt-get install -y -qq --no-install-recommends "$@" >&2; then
        # The package lists may be stale (e.g. a version was superseded): refresh and retry.
        [ "$apt_updated" -eq 0 ] || die "apt-get install $* failed"
        apt_update_once
        apt-get install -y -qq --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
    fi
}

# binary:package pairs; /usr/bin is checked explicitly in case PATH lacks it.
missing=()
for pair in prometheus:prometheus promtool:prometheus \
    prometheus-alertmanager:prometheus-alertmanager; do
    bin=${pair%%:*}
    pkg=${pair#*:}
    if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/bin/$bin" ]; then
        [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
fi
for bin in prometheus promtool prometheus-alertmanager; do
    command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || die "$bin still missing"
done

# gcloud and its emulator components come from Google's own repository, which this
# environment cannot reach, so they can only be checked.
gcloud_bin=$(command -v gcloud || true)
[ -n "$gcloud_bin" ] || die "gcloud not found (install google-cloud-cli)"
sdk_root=$(dirname "$(dirname "$(readlink -f "$gcloud_bin")")")
[ -d "$sdk_root/lib/surface/beta" ] ||
    die "gcloud 'beta' component missing under $sdk_root (gcloud components install beta)"
[ -x "$sdk_root/platform/pubsub-emulator/bin/cloud-pubsub-emulator" ] ||
    die "gcloud pubsub-emulator component missing under $sdk_root/platform" \
        "(Debian package google-cloud-cli-pubsub-emulator)"
[ -f "$sdk_root/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar" ] ||
    die "gcloud cloud-firestore-emulator component missing under $sdk_root/platform" \
        "(Debian package google-cloud-cli-firestore-emulator)"

command -v java >/dev/null 2>&1 || die "java not found (the emulators need Java 11+, e.g. openjdk-17-jre-headless)"
java_major=$(java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}')
[ "${java_major:-0}" -ge 11 ] 2>/dev/null || die "java $java_major found; the emulators need Java 11+"

# kubectl comes with the Google Cloud CLI here; Debian's kubernetes-client is too old for the
# kustomize features deploy/prometheus uses (labels, replacements, components: v4.5+).
command -v kubectl >/dev/null 2>&1 || die "kubectl not found (install kubectl with kustomize v4.5+)"
kubectl kustomize --help >/dev/null 2>&1 || die "kubectl has no kustomize subcommand"

log "ok: prometheus, promtool, prometheus-alertmanager, gcloud (pubsub + firestore emulators)," \
    "java $java_major, kubectl"
