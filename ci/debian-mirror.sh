# Sourced by the image scripts: print the Debian mirror apt is configured with, so
# no host name is ever written into the project.
debian_mirror() {
    if [ -n "${HARNESS_DEBIAN_MIRROR:-}" ]; then
        echo "$HARNESS_DEBIAN_MIRROR"
        return
    fi
    local uri
    # deb822 sources first (URIs: lines), then the one-line format.
    uri="$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v -- '-security' | grep '/debian/\?$' | head -n 1 || true)"
    if [ -z "$uri" ]; then
        uri="$(grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | sed -E 's/\[[^]]*\]//' | awk '{print $2}' \
            | grep -v -- '-security' | grep '/debian/\?$' | head -n 1 || true)"
    fi
    if [ -z "$uri" ]; then
        echo "no Debian mirror found in the apt sources; set HARNESS_DEBIAN_MIRROR" >&2
        return 3
    fi
    echo "$uri"
}
