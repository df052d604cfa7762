#!/usr/bin/env bash
# Build (or reuse from the cache) the local control plane's binaries:
# kube-apiserver, kube-controller-manager and kubectl from k8s.io/kubernetes,
# etcd from go.etcd.io/etcd/server/v3, helm from helm.sh/helm/v3, the real
# peers the e2e tier and `dev` run next to the operator (kwok from
# sigs.k8s.io/kwok: fake nodes and pods; the Submariner Lighthouse agent from
# github.com/submariner-io/lighthouse: a real MCS implementation; Cilium's
# cilium-operator from github.com/cilium/cilium: a second one), plus the
# upstream MCS CRDs from sigs.k8s.io/mcs-api (the pinned release and the one
# Lighthouse targets). Everything comes from the Go module proxy; nothing is
# downloaded from anywhere else. Each program is built from a wrapper module
# committed under modules/ (go.mod + go.sum), so CI resolves exactly the same.
#
# Usage: tools/controlplane/build.sh [all|crds]   (prints the asset directory last)
#
# Versions live in versions.env next to this script. Output goes to
#   ${DPO_CACHE_DIR:-~/.cache/dynamo-pool-operator}/k8s-<v>_etcd-<v>_helm-<v>/
# and a binary is rebuilt only when it is missing or does not report the
# pinned version. A cold build takes about 37 CPU-minutes from empty caches,
# downloads included (measured: 62 minutes of wall time on 2 cores shared with other
# builds and tests; the figure README.md gives); progress and elapsed time are
# printed every minute so nobody thinks it hung.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

K=$KUBERNETES_VERSION
MINOR=${K#1.}
MINOR=${MINOR%%.*}
STAGING=v0.${K#1.}
cache_root=${DPO_CACHE_DIR:-$HOME/.cache/dynamo-pool-operator}
out=$cache_root/k8s-${K}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}
bin=$out/bin
mkdir -p "$bin" "$out/crds"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
# A go.mod written by `go mod init` would otherwise name the toolchain.
export GOWORK=off

start=$(date +%s)
log() { printf '[controlplane %4ds] %s\n' $(($(date +%s) - start)) "$*" >&2; }

# Run a long command while printing a heartbeat line every 60 seconds.
with_heartbeat() {
    local what=$1
    shift
    local t0
    t0=$(date +%s)
    (
        # sleep in the background and wait, so TERM ends the ticker (and its
        # sleep) at once instead of leaving a sleep that holds our output open.
        trap 'kill $! 2>/dev/null; exit 0' TERM
        while :; do
            sleep 60 &
            wait $!
            printf '[controlplane] still %s (%dm elapsed)\n' "$what" $((($(date +%s) - t0) / 60)) >&2
        done
    ) &
    local ticker=$!
    local rc=0
    "$@" || rc=$?
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    return "$rc"
}

reports() { # reports BINARY EXPECTED-SUBSTRING VERSION-ARGS...
    local b=$1 want=$2 said
    shift 2
    [ -x "$b" ] || return 1
    # Capture first, then match: piping into `grep -q` under pipefail fails
    # at random, because grep exits at the first match and a binary that
    # prints more lines afterwards (etcd prints four) dies of SIGPIPE (141).
    said=$("$b" "$@" 2>/dev/null) || return 1
    [[ $said == *"$want"* ]]
}

reports_on_stderr() { # the same, for a binary that prints its version on stderr only
    local b=$1 want=$2 said
    shift 2
    [ -x "$b" ] || return 1
    said=$("$b" "$@" 2>&1 >/dev/null) || return 1
    [[ $said == *"$want"* ]]
}

# ---------------------------------------------------------------- kubernetes
kube_mod=$here/modules/kube
build_kube() {
    mkdir -p "$kube_mod"
    cd "$kube_mod"
    if ! grep -Eqs "k8s.io/kubernetes v${K}( |$)" go.mod; then
        log "resolving k8s.io/kubernetes v$K and its staging modules"
        rm -f go.mod go.sum
        go mod init local/dpo-kube-build >/dev/null 2>&1
        go mod edit -go=1.26.0
        local kmod
        kmod=$(go mod download -json "k8s.io/kubernetes@v$K" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
        go mod edit -require="k8s.io/kubernetes@v$K"
        # Every ./staging replace of kubernetes' own go.mod becomes a replace
        # to the published v0.Y.Z tag; derived, never hard-coded.
        local mods
        mods=$(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$kmod")
        [ -n "$mods" ] || { log "no staging replaces found in $kmod"; exit 1; }
        for m in $mods; do go mod edit -replace="$m=$m@$STAGING"; done
        # Mirror upstream's runtime defaults (a dependency's godebug is ignored).
        local gd
        # (sed quits at the first match itself: `| head -n1` under pipefail can
        # kill sed with SIGPIPE and the script with it.)
        gd=$(sed -n '/^godebug /{s/^godebug \(.*\)$/\1/p;q;}' "$kmod")
        [ -z "$gd" ] || go mod edit -godebug="$gd"
        log "staging modules replaced at $STAGING: $(echo "$mods" | wc -w)"
        with_heartbeat "downloading kubernetes modules" \
            go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K" \
            "k8s.io/kubernetes/cmd/kube-controller-manager@v$K" \
            "k8s.io/kubernetes/cmd/kubectl@v$K"
    fi
    local ld="-s -w"
    local p
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $p.gitVersion=v$K -X $p.gitMajor=1 -X $p.gitMinor=$MINOR"
        ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    local prog vflag
    for prog in kube-apiserver kube-controller-manager kubectl; do
        vflag=--version
        [ "$prog" != kubectl ] || vflag="version --client"
        # shellcheck disable=SC2086 # vflag is one or two words on purpose
        if reports "$bin/$prog" "v$K" $vflag; then
            log "$prog v$K is cached"
            continue
        fi
        log "building $prog v$K (cold: 10-25 minutes for the first one)"
        with_heartbeat "building $prog" \
            go build -tags selinux,notest,grpcnotrace -ldflags "$ld" \
            -o "$bin/$prog" "k8s.io/kubernetes/cmd/$prog"
        # shellcheck disable=SC2086
        reports "$bin/$prog" "v$K" $vflag || {
            log "$prog does not report v$K"
            exit 1
        }
    done
}

# ---------------------------------------------------------------------- etcd
build_etcd() {
    if reports "$bin/etcd" "etcd Version: $ETCD_VERSION" --version; then
        log "etcd $ETCD_VERSION is cached"
        return
    fi
    local d=$here/modules/etcd
    mkdir -p "$d"
    cd "$d"
    if ! grep -Eqs "go.etcd.io/etcd/server/v3 v${ETCD_VERSION}( |$)" go.mod; then
        rm -f go.mod go.sum
        go mod init local/dpo-etcd-build >/dev/null 2>&1
        go mod edit -go=1.26.0
        go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
    fi
    log "building etcd $ETCD_VERSION"
    with_heartbeat "building etcd" go build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
    reports "$bin/etcd" "etcd Version: $ETCD_VERSION" --version || {
        log "etcd does not report $ETCD_VERSION"
        exit 1
    }
}

# ---------------------------------------------------------------------- helm
build_helm() {
    if reports "$bin/helm" "v$HELM_VERSION" version --short; then
        log "helm $HELM_VERSION is cached"
        return
    fi
    local d=$here/modules/helm
    mkdir -p "$d"
    cd "$d"
    if ! grep -Eqs "helm.sh/helm/v3 v${HELM_VERSION}( |$)" go.mod; then
        rm -f go.mod go.sum
        go mod init local/dpo-helm-build >/dev/null 2>&1
        go mod edit -go=1.26.0
        go get -tool "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
    fi
    log "building helm $HELM_VERSION"
    local v=helm.sh/helm/v3/internal/version
    with_heartbeat "building helm" go build \
        -ldflags "-s -w -X $v.version=v$HELM_VERSION -X $v.metadata= -X $v.gitTreeState=clean" \
        -o "$bin/helm" helm.sh/helm/v3/cmd/helm
    reports "$bin/helm" "v$HELM_VERSION" version --short || {
        log "helm does not report $HELM_VERSION"
        exit 1
    }
}

# ---------------------------------------------------------------------- kwok
build_kwok() {
    # kwok's version is a source constant: no ldflags, and --version says it.
    if reports "$bin/kwok" "kwok version v$KWOK_VERSION " --version; then
        log "kwok $KWOK_VERSION is cached"
        return
    fi
    local d=$here/modules/kwok
    mkdir -p "$d"
    cd "$d"
    if ! grep -Eqs "sigs.k8s.io/kwok v${KWOK_VERSION}( |$)" go.mod; then
        rm -f go.mod go.sum
        go mod init local/dpo-kwok-build >/dev/null 2>&1
        go mod edit -go=1.26.0 # kwok v0.8.0's own go.mod says go 1.26.0
        go get -tool "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
    fi
    log "building kwok $KWOK_VERSION (cold: about 3 minutes)"
    with_heartbeat "building kwok" go build -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
    reports "$bin/kwok" "kwok version v$KWOK_VERSION " --version || {
        log "kwok does not report $KWOK_VERSION"
        exit 1
    }
}

# ---------------------------------------------------------- Lighthouse agent
build_lighthouse() {
    local lh=github.com/submariner-io/lighthouse
    if reports_on_stderr "$bin/lighthouse-agent" "version: v$LIGHTHOUSE_VERSION" -version; then
        log "lighthouse-agent $LIGHTHOUSE_VERSION is cached"
        return
    fi
    local d=$here/modules/lighthouse
    mkdir -p "$d"
    cd "$d"
    if ! grep -Eqs "$lh v${LIGHTHOUSE_VERSION}( |$)" go.mod; then
        rm -f go.mod go.sum
        go mod init local/dpo-lighthouse-build >/dev/null 2>&1
        local src
        src=$(go mod download -json "$lh@v$LIGHTHOUSE_VERSION" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
        # The main module's go line sets the runtime's GODEBUG defaults: mirror
        # what Lighthouse itself builds with.
        go mod edit -go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")"
        # The checksum database has no entry for some submariner-io modules
        # (admiral v0.20.0 answers 404). Lighthouse's own go.sum, inside a
        # module zip the database did verify, carries their hashes: seed ours
        # with them so `go` still checks every download. Never GONOSUMDB.
        grep '^github.com/submariner-io/' "$src/go.sum" >go.sum || true
        go get -tool "$lh/pkg/agent@v$LIGHTHOUSE_VERSION"
    fi
    log "building lighthouse-agent $LIGHTHOUSE_VERSION (cold: about 3.5 minutes)"
    with_heartbeat "building lighthouse-agent" go build \
        -ldflags "-s -w -X main.version=v$LIGHTHOUSE_VERSION" \
        -o "$bin/lighthouse-agent" "$lh/pkg/agent"
    reports_on_stderr "$bin/lighthouse-agent" "version: v$LIGHTHOUSE_VERSION" -version || {
        log "lighthouse-agent does not report $LIGHTHOUSE_VERSION"
        exit 1
    }
}

# ----------------------------------------------------------- cilium-operator
# Cilium's MCS-API implementation runs entirely in cilium-operator (ClusterMesh
# over a kvstore etcd; no agent, no datapath). Built as upstream builds
# cilium-operator-generic (the operator for clusters on no cloud's IPAM): package
# ./operator with the tag ipam_provider_operator, under that name (the operator
# reads its own name and, as plain cilium-operator, warns it is the wrong build).
# The wrapper module copies Cilium's own replace lines (a dependency's are
# ignored) and adds three: gobgp/v4 at a release (the proxy refuses the
# pseudo-version Cilium requires), and the stand-ins under modules/cilium/standins
# for two sigs.k8s.io/mcs-api submodules the proxy does not serve (`controllers`,
# one constant of which Cilium uses; `conformance`, imported only by its tests).
build_cilium() {
    local cm=github.com/cilium/cilium
    local want="Cilium-Operator $CILIUM_VERSION "
    if reports "$bin/cilium-operator-generic" "$want" --version; then
        log "cilium-operator $CILIUM_VERSION is cached"
        return
    fi
    local d=$here/modules/cilium
    mkdir -p "$d"
    cd "$d"
    if ! grep -Eqs "$cm v${CILIUM_VERSION}( |$)" go.mod ||
        ! grep -Eqs "github.com/osrg/gobgp/v4 v${CILIUM_GOBGP_VERSION}( |$)" go.mod; then
        log "resolving $cm v$CILIUM_VERSION"
        rm -f go.mod go.sum
        go mod init local/dpo-cilium-build >/dev/null 2>&1
        local cmod
        cmod=$(go mod download -json "$cm@v$CILIUM_VERSION" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
        go mod edit -go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$cmod")"
        go mod edit -require="$cm@v$CILIUM_VERSION"
        # Cilium's own replaces, one per line whether written alone or in a
        # block; a replace to a local path could not be followed: say so.
        local from arrow to ver
        while read -r from arrow to ver; do
            if [ "$arrow" != "=>" ] || [ -z "$ver" ]; then
                log "$cm's go.mod has a replace we cannot copy: $from $arrow $to $ver"
                exit 1
            fi
            go mod edit -replace="$from=$to@$ver"
        done < <(sed -n -e 's/^replace \([^(].*=>.*\)$/\1/p' \
            -e '/^replace ($/,/^)$/s/^[[:space:]]\{1,\}\(.*=>.*\)$/\1/p' "$cmod")
        go mod edit -replace="github.com/osrg/gobgp/v4=github.com/osrg/gobgp/v4@v$CILIUM_GOBGP_VERSION"
        go mod edit -replace="sigs.k8s.io/mcs-api/controllers=./standins/mcs-api-controllers"
        go mod edit -replace="sigs.k8s.io/mcs-api/conformance=./standins/mcs-api-conformance"
        with_heartbeat "downloading cilium modules" \
            go get -tags ipam_provider_operator -tool "$cm/operator@v$CILIUM_VERSION"
    fi
    log "building cilium-operator $CILIUM_VERSION (cold: 10-11 CPU-minutes, 12-15 minutes on a busy box)"
    with_heartbeat "building cilium-operator" go build -tags ipam_provider_operator \
        -ldflags "-s -w -X $cm/pkg/version.ciliumVersion=$CILIUM_VERSION" \
        -o "$bin/cilium-operator-generic" "$cm/operator"
    reports "$bin/cilium-operator-generic" "$want" --version || {
        log "cilium-operator does not report $CILIUM_VERSION"
        exit 1
    }
}

# ------------------------------------------------------------------ MCS CRDs
fetch_mcs_crds() { # fetch_mcs_crds VERSION
    local version=$1
    local dest=$out/crds/mcs-api-$version
    if [ -s "$dest/multicluster.x-k8s.io_serviceexports.yaml" ]; then
        return
    fi
    local dir
    dir=$(cd "$here" && go mod download -json "sigs.k8s.io/mcs-api@$version" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    mkdir -p "$dest"
    cp "$dir/config/crd/multicluster.x-k8s.io_serviceexports.yaml" \
        "$dir/config/crd/multicluster.x-k8s.io_serviceimports.yaml" "$dest/"
    chmod u+w "$dest"/*.yaml
    log "MCS CRDs $version copied to $dest"
}

fetch_all_crds() {
    fetch_mcs_crds "$MCS_API_VERSION"
    fetch_mcs_crds "$LIGHTHOUSE_MCS_API_VERSION"
}

case "${1:-all}" in
all)
    (build_etcd)
    (build_helm)
    (fetch_all_crds)
    (build_kube)
    (build_kwok)
    (build_lighthouse)
    (build_cilium)
    ;;
crds) (fetch_all_crds) ;; # for users who bring envtest binaries
*)
    echo "usage: $0 [all|crds]" >&2
    exit 2
    ;;
esac
log "control plane assets ready"
echo "$out"
