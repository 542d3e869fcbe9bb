"""One lab for the package: a functions-framework server per entry point."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import chatkit as K
import pytest
from fakeservers.certs import CertsServer
from harness.functions import start_function

from hostile.servers import (
    PROJECT,
    SOURCE,
    WEBHOOK_TOKEN,
    Lab,
    Server,
)


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("hostile")
    faulty = root / "faulty.sqlite"
    awaiting = K.make_faulty_store(faulty)
    base = {
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_PROJECT": PROJECT,
        "LOOPBREAKER_NOTIFIER": "log",
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        # Nothing listens there: no hostile click may ever publish.
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:9",
    }
    with CertsServer() as certs:
        chat_env = {
            **K.CHAT_ENV,
            "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL": certs.certs_url,
            "LOOPBREAKER_REMEDIATION_TOPIC": f"projects/{PROJECT}/topics/remediation",
        }
        specs = {
            "log_entry": ("on_log_entry", "cloudevent", root / "log.sqlite", {}),
            "webhook": ("on_alertmanager_webhook", "http", root / "alerts.sqlite", {}),
            "chat": (
                "on_chat_action",
                "http",
                K.copy_store(faulty, root / "chat.sqlite"),
                chat_env,
            ),
            "remediation": (
                "on_remediation_request",
                "cloudevent",
                K.copy_store(faulty, root / "remediation.sqlite"),
                chat_env,
            ),
        }
        started: dict[str, Server] = {}
        errors: list[BaseException] = []

        def start(name: str) -> None:
            target, kind, store, extra = specs[name]
            env = {**base, **extra, "LOOPBREAKER_STORE": f"sqlite:{store}"}
            try:
                started[name] = Server(start_function(target, SOURCE, kind, env), store)
            except BaseException as exc:  # reported below, after every start returned
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(name,)) for name in specs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            if errors:
                raise errors[0]
            yield Lab(awaiting=awaiting, certs=certs, **started)
        finally:
            # In parallel: each gunicorn takes a few seconds to wind down.
            stoppers = [threading.Thread(target=s.function.stop) for s in started.values()]
            for thread in stoppers:
                thread.start()
            for thread in stoppers:
                thread.join()
