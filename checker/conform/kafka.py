"""Kafka's own jars, by release, from Maven Central: org.apache.kafka:kafka_2.13:VERSION with its
runtime dependencies, resolved by Maven into ~/.cache/kcheck/kafka/VERSION/libs (never the repo).

A generated pom names the one dependency; ``mvn dependency:copy-dependencies`` copies the runtime
closure. A version is fetched once: a marker file records a complete copy."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from kcheck import cache_dir

DEFAULT_VERSION = "4.3.1"
# the releases the tests and `--which-variant` run: one before KIP-1251 (4.2.x), 4.3.1 (KIP-1251),
# and the newest
TESTED_VERSIONS = ("4.2.2", "4.3.1", "4.4.0")

_VERSION = re.compile(r"^\d+\.\d+\.\d+(-[A-Za-z0-9.]+)?$")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kcheck</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


class KafkaUnavailable(Exception):
    """Kafka cannot be run here: no Java, no Maven, or Maven cannot resolve the version (one line)."""


def cache_root() -> Path:
    return cache_dir("kafka")


def check_version(version: str) -> str:
    """A version string as Maven Central names Kafka releases (4.3.1); 4.x only (KRaft, KIP-848)."""
    if not _VERSION.match(version) or not version.startswith("4."):
        raise ValueError(f"unknown Kafka version {version!r}: give a 4.x release such as "
                         f"{', '.join(TESTED_VERSIONS)}")
    return version


def jar_dir(version: str) -> Path:
    return cache_root() / version / "libs"


def fetch(version: str, quiet: bool = True) -> Path:
    """The directory of Kafka VERSION's runtime jars, resolved by Maven on first use."""
    check_version(version)
    home = cache_root() / version
    libs, done = home / "libs", home / "complete"
    if done.exists() and any(libs.glob("kafka_2.13-*.jar")):
        if not log_binding(libs):
            _fetch_log_binding(home, libs)
        return libs
    if shutil.which("java") is None:
        raise KafkaUnavailable("no 'java' on PATH: Kafka needs Java 17 or newer "
                               "(scripts/setup.sh --test installs one)")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable("no 'mvn' on PATH: Kafka's jars are resolved with Maven "
                               "(install maven, or pass --kafka-jars DIR)")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(_POM.format(version=version))
    if libs.exists():
        shutil.rmtree(libs)
    log = home / "maven.log"
    cmd = [mvn, "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
           f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]
    with open(log, "w") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0 or not any(libs.glob("kafka_2.13-*.jar")):
        reason = _maven_reason(log)
        raise KafkaUnavailable(f"Maven could not resolve org.apache.kafka:kafka_2.13:{version}"
                               f"{': ' + reason if reason else ''} (log: {log})")
    _fetch_log_binding(home, libs)
    done.write_text(version + "\n")
    return libs


# The broker logs through SLF4J 1.x (slf4j-api is in its runtime closure) into log4j 2, but the
# binding between them is not a dependency of kafka_2.13: Kafka's distribution adds it to libs/.
# Without it the broker writes no log at all (SLF4J's no-operation logger), so it is resolved
# here too, at the log4j version Kafka's closure has.
_BINDING_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kcheck</groupId><artifactId>kafka-log-binding</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def log_binding(libs: Path) -> Path | None:
    """The SLF4J-to-log4j binding in a directory of jars, if there is one."""
    return next(iter(sorted(libs.glob("log4j-slf4j*-impl-*.jar"))), None)


def _fetch_log_binding(home: Path, libs: Path) -> None:
    core = next(iter(sorted(libs.glob("log4j-core-*.jar"))), None)
    api = next(iter(sorted(libs.glob("slf4j-api-*.jar"))), None)
    mvn = shutil.which("mvn")
    if core is None or api is None or mvn is None:
        return                      # nothing to bind, or no Maven: the broker runs without a log
    version = core.name[len("log4j-core-"):-len(".jar")]
    artifact = "log4j-slf4j2-impl" if api.name.startswith("slf4j-api-2.") else "log4j-slf4j-impl"
    pom = home / "binding-pom.xml"
    pom.write_text(_BINDING_POM.format(artifact=artifact, version=version))
    with open(home / "maven-binding.log", "w") as out:
        subprocess.call([mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                         f"-DoutputDirectory={libs}", "-DincludeScope=runtime",
                         "-DexcludeTransitive=true"], stdout=out, stderr=subprocess.STDOUT)


def _maven_reason(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        if "[ERROR]" in line and ("Could not" in line or "Failed" in line):
            return re.sub(r"\x1b\[[0-9;]*m", "", line).replace("[ERROR]", "").strip()[:200]
    return ""


def jars_version(libs: Path) -> str:
    """The Kafka release of a directory of jars (from kafka_2.13-VERSION.jar or kafka-clients)."""
    for pattern in ("kafka_2.13-*.jar", "kafka-clients-*.jar"):
        for jar in sorted(libs.glob(pattern)):
            m = re.match(r"kafka(?:_2\.13|-clients)-(.+)\.jar$", jar.name)
            if m and not m.group(1).endswith(("-test", "-sources", "-javadoc")):
                return m.group(1)
    raise KafkaUnavailable(f"{libs} holds no kafka_2.13-VERSION.jar or kafka-clients-VERSION.jar")


def classpath(libs: Path) -> str:
    jars = sorted(str(j) for j in Path(libs).glob("*.jar"))
    if not jars:
        raise KafkaUnavailable(f"no jars in {libs}")
    return os.pathsep.join(jars)
