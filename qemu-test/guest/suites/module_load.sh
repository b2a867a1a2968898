# Suite: oxe.ko loads and unloads cleanly.
suite_module_load() {
    local ko
    ko=$(oxe_ko)
    [ -f "$ko" ] || { echo "missing $ko"; return 1; }
    insmod "$ko" || return 1
    grep -q '^oxe ' /proc/modules || { echo "oxe not in /proc/modules after insmod"; return 1; }
    rmmod oxe || return 1
    if grep -q '^oxe ' /proc/modules; then
        echo "oxe still loaded after rmmod"
        return 1
    fi
    dmesg | grep -q 'oxe: loaded' || { echo "no load message from oxe"; return 1; }
    dmesg | grep -q 'oxe: unloaded' || { echo "no unload message from oxe"; return 1; }
    echo "oxe.ko loaded and unloaded"
}
