# Suite: oxe.ko loads and unloads cleanly. Through modprobe (vm.sh installs it
# under extra/), which also loads udp_tunnel, the one module it depends on.
suite_module_load() {
    modinfo oxe | grep -E '^(filename|alias|depends)' || return 1
    modprobe oxe || return 1
    grep -q '^oxe ' /proc/modules || { echo "oxe not in /proc/modules after modprobe"; return 1; }
    modprobe -r oxe || return 1
    if grep -q '^oxe ' /proc/modules; then
        echo "oxe still loaded after rmmod"
        return 1
    fi
    local log
    log=$(dmesg)
    [[ $log == *"oxe: loaded"* ]] || { echo "no load message from oxe"; return 1; }
    [[ $log == *"oxe: unloaded"* ]] || { echo "no unload message from oxe"; return 1; }
    echo "oxe.ko loaded and unloaded"
}
