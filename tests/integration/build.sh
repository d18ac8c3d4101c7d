#!/usr/bin/env bash
# The binaries as built (issue 2, item 1): PIE, full RELRO, a non-executable stack, stack
# protector and fortify in runbox and runbox-gateway; and runbox free of OpenSSL's provider
# machinery, which a single EVP call links in and which cost 5.7 ms of every start
# (docs/benchmarks.md). Each check against a control that shows it can fail.
# modes: root
. "$(dirname "$0")/../lib.sh"
lib_init build

command -v readelf >/dev/null && command -v nm >/dev/null || {
	skip "binary checks" "readelf or nm missing (binutils)"
	exit 0
}

# A control binary built here without any of the hardening.
ctl_src=$T/ctl.c
printf 'int main(void){return 0;}\n' >"$ctl_src"
ctl=$T/ctl
if ! gcc -O0 -no-pie -fno-stack-protector -Wl,-z,norelro -Wl,-z,lazy -Wl,-z,execstack -o "$ctl" "$ctl_src" 2>/dev/null; then
	skip "binary checks" "cannot build the control binary"
	exit 0
fi

pie() { readelf -hW "$1" | grep -q 'Type:[[:space:]]*DYN' && readelf -dW "$1" | grep -q 'Flags:.*PIE'; }
relro() { readelf -lW "$1" | grep -q GNU_RELRO && readelf -dW "$1" | grep -qE 'BIND_NOW|Flags:.*NOW'; }
nx_stack() { readelf -lW "$1" | grep GNU_STACK | grep -qv 'RWE'; }
stack_protector() { nm -D "$1" 2>/dev/null | grep -q ' __stack_chk_fail'; }
fortify() { nm -D "$1" 2>/dev/null | grep -qE ' __[a-z]+_chk(@|$)'; }

for check in pie relro nx_stack stack_protector fortify; do
	for bin in runbox runbox-gateway; do
		if $check "$ROOT/$bin"; then ok "$bin: $check"; else not_ok "$bin: $check"; fi
	done
	if $check "$ctl"; then not_ok "control: an unhardened binary fails $check" "it passed"
	else ok "control: an unhardened binary fails $check"; fi
done

# OpenSSL 3's provider layer: EVP_MD_fetch is its entry; runbox uses SHA256_* directly.
# Control: a unit test that calls HMAC() through EVP has it.
# With a shared libcrypto (LIBCRYPTO_STATIC=0) the calls into it are imports instead.
provider() {
	nm "$1" 2>/dev/null | grep -qE ' (EVP_MD_fetch|OSSL_PROVIDER_load)$' ||
		nm -D --undefined-only "$1" 2>/dev/null | grep -qE ' (EVP_MD_fetch|EVP_Digest[A-Za-z_]*|EVP_sha[0-9_]+|EVP_MAC_[A-Za-z_]+|HMAC[A-Za-z_]*|OSSL_[A-Za-z_]+)@'
}
if provider "$ROOT/runbox"; then not_ok "runbox links no OpenSSL provider machinery" "EVP_MD_fetch is in"
else ok "runbox links no OpenSSL provider machinery"; fi
tok=$ROOT/build/unit/test_token
if [ -x "$tok" ]; then
	if provider "$tok"; then ok "control: test_token (HMAC through EVP) links it"
	else not_ok "control: test_token (HMAC through EVP) links it" "not found: the check cannot see it"; fi
else
	skip "control: test_token links the provider machinery" "build/unit/test_token not built"
fi

# The link (Makefile, docs/benchmarks.md "Linking"): the libraries a distribution updates are
# loaded shared, so their fixes (and libseccomp's syscall table) reach runbox without a
# rebuild; libcrypto and libarchive are linked in. Control: the static probe needs nothing,
# so an empty list is what a static link looks like to this check.
needed() { readelf -dW "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }
for lib in libseccomp.so.2 libcap.so.2 libnftnl.so.11 libmnl.so.0 libjansson.so.4 libsqlite3.so.0; do
	if needed "$ROOT/runbox" | grep -qx "$lib"; then ok "runbox loads $lib shared"
	else not_ok "runbox loads $lib shared" "needed: $(needed "$ROOT/runbox" | tr '\n' ' ')"; fi
done
for lib in libcrypto.so.3 libarchive.so.13; do
	if needed "$ROOT/runbox" | grep -qx "$lib"; then not_ok "runbox links ${lib%%.so*} statically" "it loads $lib"
	else ok "runbox links ${lib%%.so*} statically"; fi
done
if [ -z "$(needed "$PROBE")" ] && needed "$ROOT/runbox" | grep -qx 'libc.so.6'; then
	ok "control: the static probe needs no library, runbox needs libc"
else not_ok "control: the static probe needs no library, runbox needs libc" "probe: $(needed "$PROBE" | tr '\n' ' ')"; fi
