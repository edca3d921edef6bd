# tests/vm/lib.sh: what tests/vm/run is made of: the matrix of tests/vm/kernels, fetching
# Debian packages with a private apt configuration, the initramfs, and booting qemu.
# Sourced by tests/vm/run, which sets $root (the checkout), $here (tests/vm) and $vm
# (target/vm), and the options $cases, $stress, $smp, $tcg and $timeout.

die() {
    echo "tests/vm/run: $*" >&2
    exit 2
}

say() {
    echo "tests/vm/run: $*" >&2
}

# The rows to run, "NAME MODEL" a line, for an arch and optionally some kernels (NAME or
# NAME,NAME...) and one preemption model.
matrix_rows() {
    local arch=$1 kernel=$2 preempt=$3
    grep -v '^#' "$here/kernels" | while read -r name karch _suite _meta models; do
        [[ $karch == "$arch" ]] || continue
        [[ -z $kernel || ,$kernel, == *",$name,"* ]] || continue  # --kernel A,B: several
        if [[ $models == - ]]; then
            [[ -n $kernel ]] || continue
            models=default
        fi
        if [[ $models == rt ]]; then
            echo "$name rt"
        elif [[ -n $preempt ]]; then
            echo "$name $preempt"
        else
            for m in $models; do echo "$name $m"; done
        fi
    done
}

qemu_binary() {
    case $1 in amd64) echo qemu-system-x86_64 ;; arm64) echo qemu-system-aarch64 ;; esac
}

# apt's options for a private state under target/vm/apt/ARCH: Debian's suites that carry
# the kernels, whatever the host's own sources are.
apt_opts() {
    local d=$vm/apt/$1
    echo "-o Dir::Etc=$d/etc -o Dir::Etc::sourcelist=$d/etc/sources.list -o Dir::Etc::sourceparts=sources.list.d" \
        "-o Dir::Etc::preferencesparts=preferences.d -o Dir::State=$d/state -o Dir::State::status=$d/state/status" \
        "-o Dir::Cache=$d/cache -o Acquire::Check-Valid-Until=false -o APT::Architecture=$1" \
        "-o APT::Architectures::=$1 -o APT::Sandbox::User=root -o quiet=2"
}

# Sets up the private apt state once (and again when the suites listed change).
apt_ready() {
    local arch=$1 d=$vm/apt/$1 sources key=/usr/share/keyrings/debian-archive-keyring.gpg
    [[ -f $key ]] || { say "no $key (apt-get install debian-archive-keyring)"; return 1; }
    mkdir -p "$d/etc/sources.list.d" "$d/etc/preferences.d" "$d/state/lists/partial" "$d/cache/archives/partial"
    touch "$d/state/status"
    sources=$(for s in bookworm trixie trixie-backports sid; do
        echo "deb [signed-by=$key] http://deb.debian.org/debian $s main"
    done)
    if [[ -f $d/updated && $(cat "$d/etc/sources.list" 2>/dev/null) == "$sources" ]]; then
        return 0
    fi
    echo "$sources" >"$d/etc/sources.list"
    say "apt-get update ($arch: bookworm, trixie, trixie-backports, sid)"
    # shellcheck disable=SC2046
    apt-get $(apt_opts "$arch") update >&2 || return 1
    touch "$d/updated"
}

# Runs a command holding target/vm/apt.lock: one apt at a time in the private state.
locked() {
    mkdir -p "$vm"
    (
        flock 9
        "$@"
    ) 9>"$vm/apt.lock"
}

# Downloads package $2 (optionally =VERSION) for $1 into the folder $3 and unpacks it there.
fetch_deb() {
    local arch=$1 pkg=$2 dest=$3 tmp
    tmp=$(mktemp -d)
    # shellcheck disable=SC2046
    if ! (cd "$tmp" && apt-get $(apt_opts "$arch") download "$pkg" >&2); then
        rm -rf "$tmp"
        return 1
    fi
    for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$dest"; done
    rm -rf "$tmp"
}

# The kernel NAME of tests/vm/kernels for ARCH, fetched once: prints its folder
# (target/vm/kernels/ARCH/NAME with vmlinuz, config and release).
fetch_kernel() {
    local arch=$1 name=$2 dir=$vm/kernels/$1/$2 suite meta version image binary x
    if [[ -f $dir/vmlinuz && -f $dir/release ]]; then
        echo "$dir"
        return 0
    fi
    read -r suite meta < <(grep -v '^#' "$here/kernels" | awk -v n="$name" -v a="$arch" '$1 == n && $2 == a {print $3, $4}')
    [[ -n $meta ]] || { say "no kernel $name for $arch in tests/vm/kernels"; return 1; }
    apt_ready "$arch" || return 1
    local opts
    opts=$(apt_opts "$arch")
    # shellcheck disable=SC2086
    version=$(apt-cache $opts madison "$meta" | awk -v s="$suite/main" '$6 == s {print $3; exit}')
    [[ -n $version ]] || { say "$meta is not in $suite for $arch"; return 1; }
    # shellcheck disable=SC2086
    image=$(apt-cache $opts depends "$meta=$version" | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
    [[ -n $image ]] || { say "$meta $version names no linux-image package"; return 1; }
    say "fetching $image ($suite, for $name)"
    x=$(mktemp -d)
    fetch_deb "$arch" "$image" "$x" || { rm -rf "$x"; return 1; }
    if ! compgen -G "$x/boot/vmlinu*" >/dev/null; then
        # Newer packages put the kernel itself in linux-binary-RELEASE, as
        # /usr/lib/modules/RELEASE/vmlinuz.
        # shellcheck disable=SC2086
        binary=$(apt-cache $opts depends "$image" | sed -n 's/^ *Depends: \(linux-binary-[^ ]*\)$/\1/p' | head -1)
        [[ -n $binary ]] && fetch_deb "$arch" "$binary" "$x"
    fi
    local kernel release
    kernel=$(compgen -G "$x/boot/vmlinu*" | head -1 || true)
    release=${kernel##*/vmlinu?-}
    if [[ -z $kernel ]]; then
        kernel=$(compgen -G "$x/usr/lib/modules/*/vmlinu*" | head -1 || true)
        release=$(basename "$(dirname "$kernel")")
    fi
    [[ -n $kernel ]] || { say "no kernel image in $image"; rm -rf "$x"; return 1; }
    mkdir -p "$dir"
    cp "$kernel" "$dir/vmlinuz"
    echo "$release" >"$dir/release"
    echo "$meta $version from $suite" >"$dir/package"
    rm -rf "$x"
    echo "$dir"
}

# The shared libraries an executable needs (and its interpreter), as ldd finds them here.
libraries_of() {
    ldd "$1" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
}

# Builds the Go program in folder $2 for $1 into $3 (static: CGO_ENABLED=0).
go_static() {
    (cd "$2" && CGO_ENABLED=0 GOARCH=$1 GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$3" .) >&2
}

# gtrace's release build for $1: target/release/gtrace here (or $GTRACE_VM_GTRACE).
gtrace_release() {
    if [[ -n ${GTRACE_VM_GTRACE:-} ]]; then
        echo "$GTRACE_VM_GTRACE"
        return
    fi
    if [[ $1 == arm64 && $(uname -m) == x86_64 ]]; then
        "$here/gtrace-arm64" || die "no aarch64 build of gtrace (tests/vm/gtrace-arm64)"
        return
    fi
    [[ $1 == amd64 && $(uname -m) == x86_64 ]] || die "gtrace for $1: set GTRACE_VM_GTRACE to its build"
    say "cargo build --release"
    # Without the variables cargo sets for a test (CARGO_PKG_NAME, ...): build scripts
    # that watch them (ring's) would rebuild, here and again in the next plain build.
    local unset=()
    for v in $(compgen -e | grep -E '^CARGO_(PKG_|MANIFEST_|CRATE_|BIN_|TARGET_TMPDIR|PRIMARY_)'); do
        unset+=(-u "$v")
    done
    (cd "$root" && env "${unset[@]}" cargo build --release --quiet --bin gtrace) >&2 || die "cargo build --release failed"
    echo "$root/target/release/gtrace"
}

# The initramfs for ARCH, built in a folder of this run's own (runs may overlap): prints
# its path, target/vm/run-PID/initramfs-ARCH.cpio.gz.
build_initramfs() {
    local arch=$1 r=$vm/run-$$/root out=$vm/run-$$/initramfs-$1.cpio.gz gtrace lib
    rm -rf "$r"
    mkdir -p "$r"/{bin,proc,sys,dev,tmp,src,root,etc}
    if [[ ! -x $vm/busybox-$arch ]]; then
        local x
        x=$(mktemp -d)
        locked apt_ready "$arch" && locked fetch_deb "$arch" busybox-static "$x" || die "cannot fetch busybox-static"
        cp "$(find "$x" -path "*bin/busybox" -type f | head -1)" "$vm/busybox-$arch" || die "no busybox in busybox-static"
        rm -rf "$x"
    fi
    cp "$vm/busybox-$arch" "$r/bin/busybox"
    gtrace=$(gtrace_release "$arch")
    cp "$gtrace" "$r/bin/gtrace"
    if [[ $arch == amd64 && $(uname -m) == x86_64 ]]; then
        for lib in $(libraries_of "$gtrace"); do
            mkdir -p "$r$(dirname "$lib")"
            cp -L "$lib" "$r$lib"
        done
    fi
    local goarch=$arch
    for p in e2e goroutines lines panics gomaps prod fleet; do
        go_static "$goarch" "$root/tests/go/$p" "$r/bin/$p" || die "go build of tests/go/$p failed"
    done
    go_static "$goarch" "$here/guest" "$r/bin/vmguest" || die "go build of tests/vm/guest failed"
    go_static "$goarch" "$here/stress" "$r/bin/stress" || die "go build of tests/vm/stress failed"
    cp "$root/tests/go/lines/main.go" "$r/src/lines.go"
    cp "$here/init" "$r/init"
    chmod 755 "$r/init" "$r"/bin/*
    echo "root:x:0:0:root:/root:/bin/sh" >"$r/etc/passwd"
    echo "tracer:x:1000:1000:tracer:/tmp:/bin/sh" >>"$r/etc/passwd"
    (cd "$r" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 >"$out") || die "cpio failed"
    rm -rf "$r"
    say "initramfs: $out ($(du -h "$out" | cut -f1))"
    echo "$out"
}

# Boots ARCH's kernel in folder KDIR with INITRD and preemption MODEL, the serial console
# into LOG. Fails when the VM had to be killed.
boot() {
    local arch=$1 kdir=$2 initrd=$3 model=$4 log=$5 append machine=()
    # no_timer_check: under TCG on a loaded host the kernel's check of the IO-APIC timer
    # may time out and panic at boot.
    append="console=ttyS0 panic=-1 loglevel=4 no_timer_check gtrace.cases=$cases gtrace.stress=$stress"
    case $model in none|voluntary|full|lazy) append+=" preempt=$model" ;; esac
    append+=" ${GTRACE_VM_APPEND:-}"
    case $arch in
        amd64) machine=(-cpu max) ;;
        # pauth-impdef: pointer authentication with QEMU's own cheap hash instead of the
        # architected QARMA, which TCG computes slowly (the guest sees no difference).
        arm64) machine=(-machine virt -cpu max,pauth-impdef=on); append=${append/ttyS0/ttyAMA0} ;;
    esac
    say "booting $(cat "$kdir/release") (${model}, $smp vCPUs, TCG thread=$tcg)"
    local status=0
    timeout -k 10 "$timeout" "$(qemu_binary "$arch")" "${machine[@]}" -accel "tcg,thread=$tcg" \
        -smp "$smp" -m 2048 -nographic -no-reboot -kernel "$kdir/vmlinuz" -initrd "$initrd" \
        -append "$append" </dev/null >"$log" 2>&1 || status=$?
    ((status != 124 && status != 137))
}

# The value of KEY= in the guest's `GTRACE-VM info` lines.
field() {
    printf '%s\n' "$1" | grep -a '^GTRACE-VM info' | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1 || true
}

row() {
    printf '%-10s %-26s %-6s %-10s %6s %6s %6s  %s\n' "$@"
}
