#!/usr/bin/env bash
# ctest systemd_units_name_packaged_files: in the package's installed tree ROOT
# (`packaging/build-deb --stage`), each unit of deploy/systemd is installed as written, every
# program it runs is there and executable (but /bin/kill, which procps, a dependency of the
# package, installs), every file it reads (EnvironmentFile=, --config) is shipped, the agent's
# helpers sit next to the binary gpusched runs, and every flag the unit passes is one the
# installed `gpusched server|agent --help` lists.
set -euo pipefail
root=$(cd "${1:?usage: units_name_packaged_files_test.sh ROOT}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for unit in "$here"/*.service; do
  name=${unit##*/}
  installed=$root/lib/systemd/system/$name
  if ! cmp -s "$unit" "$installed"; then fail "$name: not installed as written"; continue; fi
  # Exec*= lines: the program after systemd's prefixes (-, @, :, +, !).
  while IFS= read -r line; do
    cmd=${line#*=}
    cmd=${cmd##[-@:+!]}
    read -r -a words <<<"$cmd"
    prog=${words[0]}
    before=$failures
    if [ "$prog" = /bin/kill ]; then  # ExecReload: procps's, a dependency of the package
      grep -q '^Depends:.*\bprocps\b' "$here/../../packaging/debian/control.in" &&
        echo "ok: $name: $prog from procps, which the package depends on" ||
        fail "$name: $prog needs procps in the package's Depends:"
      continue
    fi
    if [ ! -x "$root$prog" ]; then fail "$name: $prog is not an executable of the package"; continue; fi
    # What the program really is (links resolved inside the tree) and what lies beside it.
    real=$(cd "$(dirname "$root$prog")" && readlink -f "$(basename "$prog")")
    for helper in gpusched-full gpusched-shim libgpusched_preload.so; do
      [ -f "$(dirname "$real")/$helper" ] || fail "$name: no $helper next to $real"
    done
    for ((i = 1; i < ${#words[@]}; i++)); do
      [ "${words[i]}" = --config ] && { [ -f "$root${words[i + 1]}" ] ||
                                        fail "$name: ${words[i + 1]} is not shipped"; }
      case ${words[i]} in
        --*) "$root$prog" "${words[1]}" --help | grep -q -- "${words[i]}\b" ||
               fail "$name: \`${words[1]} --help\` does not list ${words[i]}" ;;
      esac
    done
    [ "$failures" -eq "$before" ] &&
      echo "ok: $name: $prog -> ${real#"$root"}, helpers beside it, flags known: ${words[*]:1}"
  done < <(grep -E '^Exec[A-Za-z]*=' "$unit")
  while IFS= read -r file; do
    file=${file#EnvironmentFile=}
    file=${file#-}
    [ -f "$root$file" ] || fail "$name: $file is not shipped"
  done < <(grep -E '^EnvironmentFile=' "$unit")
done
[ "$failures" -eq 0 ]
