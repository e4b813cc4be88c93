# Sourced by scripts/java-producer.sh, java-allocate-golden.sh, bench-clients.sh, bench-core-vs-java.sh and java-oracle.sh: builds the Java helpers
# in tests/java (Maven: classes + runtime jars) into $OUT once. The build is redone only when
# tests/java/pom.xml or a file under tests/java/src is newer than it; a lock makes concurrent
# first calls (from any of them) safe. Sets REPO_ROOT, SRC, OUT (RMQ_JAVA_PRODUCER_DIR), JAVA and
# MVN (both overridable); the caller's name prefixes messages.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SRC="$REPO_ROOT/tests/java"
OUT=${RMQ_JAVA_PRODUCER_DIR:-$REPO_ROOT/target/java-producer}
JAVA=${JAVA:-java}
MVN=${MVN:-mvn}
JAVA_HELPERS_STAMP="$OUT/.built"

java_helpers_classes_built() {
  local c
  for c in Produce AllocateGolden ConsumeBench OracleConsume DecodeBench PqBench; do
    [[ -f $OUT/build/classes/rmqtest/$c.class ]] || return 1
  done
  [[ -d $OUT/lib ]]
}

java_helpers_up_to_date() {
  [[ -f $JAVA_HELPERS_STAMP ]] && java_helpers_classes_built || return 1
  [[ -z $(find "$SRC/pom.xml" "$SRC/src" -newer "$JAVA_HELPERS_STAMP" -print -quit) ]]
}

java_helpers_build() {
  java_helpers_up_to_date && return 0
  local me
  me=$(basename "$0")
  mkdir -p "$OUT"
  (
    flock -w 600 9 || { echo "[$me] timed out waiting for $OUT/.lock" >&2; exit 1; }
    if java_helpers_up_to_date; then exit 0; fi
    echo "[$me] building $SRC into $OUT" >&2
    rm -rf "${OUT:?}/build" "${OUT:?}/lib" "$JAVA_HELPERS_STAMP"
    # maven -q still prints ANSI resets; strip them
    "$MVN" -B -q -Dstyle.color=never -f "$SRC/pom.xml" package dependency:copy-dependencies \
      -Drmq.buildDir="$OUT/build" -DincludeScope=runtime -DoutputDirectory="$OUT/lib" \
      -DskipTests 2>&1 9>&- | sed -e 's/\x1b\[[0-9;]*m//g' >&2
    java_helpers_classes_built || { echo "[$me] build failed" >&2; exit 1; }
    touch "$JAVA_HELPERS_STAMP"
  ) 9>"$OUT/.lock"
}
