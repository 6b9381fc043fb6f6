#!/bin/sh
# Builds the JVM binding of Concord:
#   OUTDIR/libconcord_jni.so   the JNI glue (jni/concord_jni.c), linked against libConcordC
#   OUTDIR/classes             the binding (src/), for Java 17
#   OUTDIR/test-classes        the test programs (test/)
#
# Usage: build.sh OUTDIR [LIBDIR]
#   LIBDIR holds libConcordC.so (default: .build/debug of the repository this script is in, where
#   `swift build` puts it). The glue finds it there at run time too (its rpath).
# Needs clang and a JDK 17 or later: javac from JAVA_HOME when it is set, else from PATH.
set -eu

usage() {
    echo "usage: build.sh OUTDIR [LIBDIR]" >&2
    exit 64
}
fail() {
    echo "build.sh: $*" >&2
    exit 1
}

[ $# -ge 1 ] && [ $# -le 2 ] || usage

# Paths from this script's place, so that the repository may be cloned anywhere.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
libdir=${2:-$root/.build/debug}
[ -d "$libdir" ] || fail "no directory $libdir (where libConcordC should be: run 'swift build' first, or give LIBDIR)"
libdir=$(cd "$libdir" && pwd)

case $(uname -s) in
    Linux) platform=linux; library=libconcord_jni.so ;;
    Darwin) platform=darwin; library=libconcord_jni.dylib ;;
    *) fail "unsupported system $(uname -s): this script knows Linux and macOS" ;;
esac
[ -e "$libdir/libConcordC.so" ] || [ -e "$libdir/libConcordC.dylib" ] || fail "no libConcordC in $libdir: run 'swift build' first, or give LIBDIR"

# The JDK: JAVA_HOME's, else the one whose javac is on PATH (followed through its links, as
# /usr/bin/javac is one, to find the JDK's include directory with jni.h).
if [ -n "${JAVA_HOME:-}" ]; then
    javac=$JAVA_HOME/bin/javac
    [ -x "$javac" ] || fail "javac not found: JAVA_HOME is $JAVA_HOME, which has no bin/javac"
else
    javac=$(command -v javac) || fail "javac not found: install a JDK 17 or later, or set JAVA_HOME"
    javac=$(readlink -f "$javac")
fi
jdk=$(dirname "$(dirname "$javac")")
[ -f "$jdk/include/jni.h" ] || fail "no jni.h in $jdk/include (is $jdk a JDK, not a JRE?)"
command -v clang >/dev/null 2>&1 || fail "clang not found: install clang (the Swift toolchain has one)"

# 1. The JNI glue.
clang -std=c11 -O2 -g -fPIC -shared -Wall -Wextra -Werror \
    -I "$root/Sources/ConcordC/include" -I "$jdk/include" -I "$jdk/include/$platform" \
    "$here/jni/concord_jni.c" -L "$libdir" -lConcordC -Wl,-rpath,"$libdir" \
    -o "$out/$library"

# 2. The binding and 3. its tests, each from a list of its sources (quoted: paths may hold spaces).
list_sources() {
    find "$1" -name '*.java' | sort | sed 's/.*/"&"/' >"$2"
}
rm -rf "$out/classes" "$out/test-classes"
list_sources "$here/src" "$out/sources.txt"
"$javac" --release 17 -Xlint:all -Werror -encoding UTF-8 -d "$out/classes" @"$out/sources.txt"
list_sources "$here/test" "$out/test-sources.txt"
"$javac" --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$out/classes" -d "$out/test-classes" @"$out/test-sources.txt"

echo "built $out/$library, $out/classes and $out/test-classes" >&2
