#!/usr/bin/env bash
# Install Hearth for this user from the unpacked download (the folder this script is in), or remove it.
#
#   ./install.sh [--prefix DIR]               copy the folder to DIR/opt/hearth, link DIR/bin/hearth to
#                                             the command line, add the menu entry and the icons
#   ./install.sh --uninstall [--prefix DIR]   remove exactly what the install added
#
# DIR is ~/.local unless given. The install lists what it added (files and the folders it had to
# create) in DIR/opt/hearth/installed-files; --uninstall removes those and nothing else. Conversations,
# models and settings live elsewhere (~/.local/share/Hearth, ~/.config/Hearth, ~/.cache/Hearth, or
# the data folder chosen in Hearth's settings; downloaded models in the Hugging Face cache) and are
# never touched: --uninstall lists them, with their sizes and how to delete each.
set -euo pipefail

ICON_SIZES=(16 24 32 48 64 128 256 512)
MANIFEST_NAME=installed-files

say() { printf 'hearth: %s\n' "$*"; }
fail() { printf 'hearth: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '2,7s/^# \{0,1\}//p' "$0"
    exit "${1:-0}"
}

prefix="$HOME/.local"
action=install
while (($#)); do
    case $1 in
        --uninstall) action=uninstall ;;
        --prefix) (($# >= 2)) || fail "--prefix needs a folder"; prefix=$2; shift ;;
        --prefix=*) prefix=${1#--prefix=} ;;
        -h | --help) usage ;;
        *) printf 'hearth: unknown option %s\n\n' "$1" >&2; usage 2 ;;
    esac
    shift
done
[[ $prefix == /* ]] || prefix="$PWD/$prefix"

bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
opt="$prefix/opt/hearth"
manifest="$opt/$MANIFEST_NAME"
bin_link="$prefix/bin/hearth"
desktop_file="$prefix/share/applications/hearth.desktop"
icon_file() { printf '%s/share/icons/hicolor/%sx%s/apps/hearth.png' "$prefix" "$1" "$1"; }

added=()  # what this install adds outside $opt, in order: files, and folders (ending in /) it created

make_folder() {  # mkdir -p that notes each folder it creates, so the uninstall can take it away again
    [[ -d $1 ]] && return 0
    make_folder "$(dirname "$1")"
    mkdir "$1"
    added+=("$1/")
}

add_file() {  # add_file SOURCE TARGET MODE
    make_folder "$(dirname "$2")"
    install -m "$3" "$1" "$2"
    added+=("$2")
}

remove_listed() {  # take away what a manifest lists, newest first; a folder only if it is empty
    local listed=() i entry
    mapfile -t listed <"$1"
    rm -rf "$opt"
    for ((i = ${#listed[@]} - 1; i >= 0; i--)); do
        entry=${listed[i]}
        if [[ $entry == */ ]]; then
            rmdir "$entry" 2>/dev/null || true
        elif [[ -L $entry || -f $entry ]]; then
            rm -f "$entry"
        fi
    done
}

check_bundle() {
    local part
    for part in Hearth hearth; do
        [[ -x $bundle/$part ]] || fail "$bundle/$part is missing: run install.sh from the unpacked Hearth folder."
    done
    [[ -f $bundle/hearth.desktop && -d $bundle/icons ]] ||
        fail "$bundle has no hearth.desktop or icons/: run install.sh from the unpacked Hearth folder."
    [[ $bundle != "$opt" ]] || fail "this is the installed copy: run install.sh from the unpacked download."
    [[ $opt != *[\"\`\$\\%\|\&]* ]] ||
        fail "the folder $opt has a character a menu entry cannot hold; choose another --prefix."
    if [[ -e $bin_link && ! -L $bin_link ]]; then
        fail "$bin_link exists and is not Hearth's link; move it away first."
    fi
}

copy_bundle() {  # through a partial copy, so a failed copy never looks like an install
    if [[ -f $manifest ]]; then
        say "replacing the Hearth installed in $opt"
        remove_listed "$manifest"
    fi
    make_folder "$(dirname "$opt")"
    rm -rf "$opt" "$opt.partial"
    cp -a "$bundle/." "$opt.partial"
    mv "$opt.partial" "$opt"
}

write_desktop_entry() {  # Exec gets the quoted path (a command line), TryExec the bare one (a path)
    local entry
    entry=$(mktemp)
    sed -e "s|^Exec=@EXEC@|Exec=\"$opt/Hearth\"|" -e "s|@EXEC@|$opt/Hearth|g" -e "s|@ICON@|hearth|g" \
        "$opt/hearth.desktop" >"$entry"
    add_file "$entry" "$desktop_file" 644
    rm -f "$entry"
}

install_hearth() {
    check_bundle
    say "installing Hearth into $opt"
    copy_bundle
    make_folder "$(dirname "$bin_link")"
    ln -sfn "$opt/hearth" "$bin_link"
    added+=("$bin_link")
    write_desktop_entry
    local size
    for size in "${ICON_SIZES[@]}"; do
        if [[ -f $opt/icons/hearth-$size.png ]]; then
            add_file "$opt/icons/hearth-$size.png" "$(icon_file "$size")" 644
        fi
    done
    printf '%s\n' "${added[@]}" >"$manifest"
    say "installed: the menu has Hearth, and $bin_link runs the command line."
    case ":$PATH:" in
        *":$prefix/bin:"*) ;;
        *) say "$prefix/bin is not on your PATH: add it to run 'hearth' from a terminal." ;;
    esac
}

expand_home() { printf '%s' "${1/#\~/$HOME}"; }

setting() {  # setting FILE KEY: a plain string value from Hearth's settings.json, or nothing
    sed -n "s/^ *\"$2\": *\"\([^\"\\\\]*\)\",\{0,1\}\$/\1/p" "$1" 2>/dev/null | head -n 1 || true
}

kept=0
tell_kept() {  # tell_kept WHAT FOLDER [HOW]: one kept folder, its size and how to delete it
    [[ -d $2 ]] || return 0
    kept=$((kept + 1))
    say "  $1: $2 ($(du -sh -- "$2" 2>/dev/null | cut -f1))"
    say "      ${3:-delete with: rm -rf $(printf '%q' "$2")}"
}

list_kept_files() {  # the folders of app/services/paths.py (platformdirs, or HEARTH_HOME) and huggingface_hub's
    local data config cache chosen hf_home hub
    if [[ -n ${HEARTH_HOME:-} ]]; then
        data=$(expand_home "$HEARTH_HOME")/data config=$(expand_home "$HEARTH_HOME")/config
        cache=$(expand_home "$HEARTH_HOME")/cache
    else
        data=${XDG_DATA_HOME:-$HOME/.local/share}/Hearth config=${XDG_CONFIG_HOME:-$HOME/.config}/Hearth
        cache=${XDG_CACHE_HOME:-$HOME/.cache}/Hearth
    fi
    chosen=$(setting "$config/settings.json" data_folder)
    hf_home=$(expand_home "${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}")
    hub=$(expand_home "${HF_HUB_CACHE:-${HUGGINGFACE_HUB_CACHE:-$hf_home/hub}}")
    say "kept your own files (Hearth's install never touches them):"
    tell_kept "conversations and documents" "$data"
    [[ -z $chosen || $chosen == "$data" ]] || tell_kept "conversations and documents (the data folder chosen in Settings)" "$chosen"
    tell_kept "settings" "$config"
    tell_kept "caches and logs" "$cache"
    tell_kept "downloaded models, in the Hugging Face cache other programs share" "$hub" \
        "delete the models--* folders you no longer need: rm -rf $(printf '%q' "$hub")/models--ORG--NAME"
    ((kept)) || say "  none: Hearth left no conversations, settings or models for this user."
}

uninstall_hearth() {
    [[ -f $manifest ]] || fail "no Hearth installed by this script in $opt (nothing removed)."
    remove_listed "$manifest"
    say "removed Hearth from $prefix."
    list_kept_files
}

"${action}_hearth"
