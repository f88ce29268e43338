"""The built image holds no setuid/setgid bit (checked by ``find`` inside a container of
it, as root so that no directory is unreadable). (The build's clearing:
tests/unit/test_image_setid.py.)"""

from __future__ import annotations


def test_the_built_image_has_no_setuid_or_setgid_file(sandbox_image, docker_client):
    out = docker_client.containers.run(
        sandbox_image,
        ["find", "/", "-xdev", "-perm", "/6000", "-printf", "%m %p\\n"],
        user="0",
        network_mode="none",
        remove=True,
        stderr=True,
    ).decode()
    assert out == "", f"setuid/setgid paths in {sandbox_image}:\n{out}"
    # the check itself can see such a bit: a tmpfs path it creates is listed
    probe = docker_client.containers.run(
        sandbox_image,
        ["sh", "-c", "touch /tmp/x && chmod 4755 /tmp/x && find /tmp -perm /6000"],
        user="0",
        network_mode="none",
        remove=True,
        tmpfs={"/tmp": "rw"},
    ).decode()
    assert probe == "/tmp/x\n"
