import pytest

from core.errors import ErrorCode, Issue
from core.privacy import screen, screen_text

CAIRN_TOKEN = "cairn_" + "Xq3-vB9_kL2mN8pQ4rS6tU0wY1zA5cD7eF9gH2jK4lM"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"

# (text, the private part that must never be echoed back)
REFUSED = [
    # e-mail addresses
    ("Contact alice@example.com for access.", "alice@example.com"),
    ("maintainer: Jane.Doe+a2a@mail.co.uk", "Jane.Doe+a2a@mail.co.uk"),
    ("<bob_smith@corp-mail.io>", "bob_smith@corp-mail.io"),
    ("mailto:ops@company.org", "ops@company.org"),
    # credentials
    (f"my token is {CAIRN_TOKEN}", CAIRN_TOKEN),
    (PEM, "MIIEpAIBAAKCAQEA7"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "BEGIN OPENSSH PRIVATE KEY"),
    ("-----BEGIN PRIVATE KEY-----", "BEGIN PRIVATE KEY"),
    (f"the session cookie was {JWT}", JWT),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("temporary key ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("GH token ghp_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912E7710c838347Ae178B4a"),
    ("ghs_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "ghs_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    ("SLACK=xoxb-123456789012-1234567890123-AbCdEf", "xoxb-123456789012-1234567890123-AbCdEf"),
    ("xoxp-2048-abcdefghij-klmnop", "xoxp-2048-abcdefghij-klmnop"),
    ("export OPENAI=sk-proj-4f9A8b7C6d5E4f3G2h1I0jKlMn", "sk-proj-4f9A8b7C6d5E4f3G2h1I0jKlMn"),
    (
        "key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-yz",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-yz",
    ),
    ("maps key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("Authorization: Bearer abcdef0123456789abcdef0123", "abcdef0123456789abcdef0123"),
    ("connect with password=hunter2", "hunter2"),
    ("DB_PASSWORD=s3cr3t-Pa55", "s3cr3t-Pa55"),
    ('{"api_key": "a1b2c3d4e5f6"}', "a1b2c3d4e5f6"),
    ("client_secret = 'q8Zt4Wm2'", "q8Zt4Wm2"),
    ("curl --password=Tr0ub4dor&3 https://example.com", "Tr0ub4dor"),
    # private URLs
    ("the server runs at http://localhost:8000/api", "localhost:8000"),
    ("run it and open localhost:3000 in a browser", "localhost:3000"),
    ("GET http://127.0.0.1:5000/health", "127.0.0.1"),
    ("the box is at 10.0.3.17", "10.0.3.17"),
    ("proxy 172.20.1.5:3128", "172.20.1.5"),
    ("router admin on https://192.168.1.1/", "192.168.1.1"),
    ("metadata service 169.254.169.254.", "169.254.169.254"),
    ("listening on http://[::1]:8080/", "[::1]"),
    ("link-local fe80::1ff:fe23:4567:890a%eth0", "fe80::1ff:fe23:4567:890a"),
    ("ULA address fd12:3456:789a::1", "fd12:3456:789a::1"),
    ("see http://printer.local/status", "printer.local"),
    ("https://grafana.corp.internal/d/abc", "grafana.corp.internal"),
    ("db.home.lan:5432 is the database", "db.home.lan"),
    ("http://app.localhost/", "app.localhost"),
    ("postgres://admin:s3cret@db.example.com/prod", "admin:s3cret"),
    ("open file:///etc/cairn/settings.toml", "file:///etc/cairn/settings.toml"),
    (
        "https://bucket.s3.amazonaws.com/f.pdf?X-Amz-Algorithm=AWS4&X-Amz-Signature=9f2c1a",
        "X-Amz-Signature=9f2c1a",
    ),
    (
        "https://storage.googleapis.com/b/o?X-Goog-Signature=abc123",
        "X-Goog-Signature=abc123",
    ),
    ("https://example.com/download?id=7&token=Zx81Qw", "token=Zx81Qw"),
    ("https://acct.blob.core.windows.net/c/b?sv=2020&sig=AbC%2Bd", "sig=AbC%2Bd"),
    # local paths
    ("the file is at /home/alice/projects/notes.md", "/home/alice"),
    ("cat /Users/bob/Desktop/todo.txt", "/Users/bob"),
    ("cd /root/.ssh", "/root/"),
    ("C:\\Users\\carol\\AppData\\Local", "C:\\Users\\carol"),
    ("C:/Users/dave/Documents", "C:/Users/dave"),
    ("edit ~/.bashrc then reload", "~/.bashrc"),
    # raw logs
    (
        'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
        "ValueError: boom",
        'File "app.py", line 3',
    ),
    (
        "TypeError: x is undefined\n    at foo (src/a.js:10:5)\n    at bar (src/b.js:20:7)",
        "src/a.js:10:5",
    ),
    (
        "Exception in thread main\n\tat com.acme.Foo.run(Foo.java:42)\n"
        "\tat com.acme.Main.main(Main.java:7)",
        "Foo.java:42",
    ),
    (
        '  File "x.py", line 3, in f\n  File "y.py", line 9, in g',
        'File "x.py", line 3',
    ),
    (
        "2026-11-01 12:00:00 INFO starting\n2026-11-01 12:00:01 INFO ready\n"
        "2026-11-01 12:00:02 ERROR crashed",
        "ERROR crashed",
    ),
    (
        "2026-11-01T12:00:00Z worker up\n2026-11-01T12:00:05Z job 1\n2026-11-01T12:00:09Z job 2",
        "worker up",
    ),
    ("[12:00:01] connect\n[12:00:02] retry\n[12:00:03] gave up", "gave up"),
]

PASSED = [
    "The schema constant is cairn_task_contribution_schema_version_one_ok.",
    # commit hashes and versions
    "fixed in commit 3f2a9c1",
    "see 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "released in 1.3.0",
    "upgrade to v2.0.0-rc.1 first",
    "Python 3.11.4 and Node 20.10.0",
    "the image is python:3.11-slim",
    # packages and public URLs
    "install @a2a-js/sdk and @types/node",
    "pin @a2a-js/sdk@0.3.1 in package.json",
    "https://github.com/a2aproject/a2a-js/blob/main/src/client.ts",
    "https://docs.python.org/3/library/json.html",
    "https://example.com/search?q=token&page=2",
    "clone git@github.com:a2aproject/a2a-js.git",
    "ssh://git@github.com/a2aproject/a2a-js.git",
    "https://medium.com/@someone/a-post",
    # code identifiers and code talk
    "A2A_PROTOCOL_VERSION is exported from json_rpc_transport.ts",
    "sk_len and task-key are parameters",
    "the @dataclass and @pytest.fixture decorators",
    "the field is user@ followed by the host",
    "std::vector<int> and a[::2] and s[::-1]",
    "use threading.local for that",
    "package com.example.internal;",
    "api_key=os.environ['KEY']",
    "Client(api_key=api_key, password=password)",
    "password=None by default",
    "set password=<your password> in the config",
    "api_key=${API_KEY}",
    "password: str = field(default='')",
    "the sk-learn style API",
    "image@sha256:4f5d2a",
    "Cache-Control: max-age=3600",
    "id 550e8400-e29b-41d4-a716-446655440000",
    # paths
    "see src/client/index.ts",
    "the endpoint is /api/a2a",
    "installed under /usr/lib/python3",
    "the /home page of the docs",
    "C:\\Program Files\\Node",
    "https://example.com/~/docs",
    # dates, times and prose
    "published 2026-11-01",
    "the run started at 2026-11-01T12:00:00Z and finished fine",
    "2026-11-01 12:00:00 first\n2026-11-01 12:00:01 second",
    "the docs say the password field is optional",
    "Password: see the docs",
    "we must finish at the deadline",
    "at the deadline\n    at most three retries",
    "Bearer token is required",
    "Authorization: Bearer <token>",
    "the server runs on localhost during development",
    "bind to 0.0.0.0 and port 8080",
    "public DNS 8.8.8.8 and the example 192.0.2.1",
    "2001:db8::1 is a documentation address",
    "meet at 12:00:01 sharp",
    "the Traceback header is printed by Python",
    "X-Amz-Signature is a query parameter of presigned URLs",
    "127 tests passed in 10.5 seconds",
]


@pytest.mark.parametrize(("text", "secret"), REFUSED)
def test_private_text_is_refused_without_echoing_it(text, secret):
    issues = screen_text("request.summary", text)

    assert issues, text
    for issue in issues:
        assert issue.code == ErrorCode.PRIVATE_CONTENT
        assert str(issue.code) == "private_content"
        assert issue.path == "request.summary"
        assert secret not in issue.message
        assert text not in issue.message


@pytest.mark.parametrize("text", PASSED)
def test_ordinary_technical_text_passes(text):
    assert screen_text("request.summary", text) == []


def test_corpus_is_large_enough():
    assert len(REFUSED) >= 45
    assert len(PASSED) >= 45


def test_screen_collects_issues_across_fields_in_order():
    issues = screen(
        [
            ("request.title", "Review of the A2A client"),
            ("request.findings[0].text", "mail me at alice@example.com"),
            ("request.findings[1].text", "version 1.3.0 is fine"),
            ("request.findings[2].text", "logs live in /home/alice/logs"),
        ]
    )

    assert [(issue.path, issue.code) for issue in issues] == [
        ("request.findings[0].text", ErrorCode.PRIVATE_CONTENT),
        ("request.findings[2].text", ErrorCode.PRIVATE_CONTENT),
    ]
    assert "e-mail" in issues[0].message
    assert "local file path" in issues[1].message


def test_several_kinds_in_one_field_give_several_issues():
    text = (
        f"alice@example.com pasted /home/alice/.env with {CAIRN_TOKEN} from http://localhost:8000"
    )

    issues = screen_text("request.summary", text)

    assert [issue.message for issue in issues] == [
        "looks like an e-mail address",
        "looks like a credential (a Cairn token)",
        "looks like a private URL (a local or internal host)",
        "looks like a local file path (inside a home directory)",
    ]
    assert all(issue.path == "request.summary" for issue in issues)


def test_one_issue_per_kind_in_a_field():
    text = f"Authorization: Bearer {JWT}\nalso bob@example.com and carol@example.org"

    issues = screen_text("request.summary", text)

    assert len(issues) == 2
    assert [issue.message.split(" (")[0] for issue in issues] == [
        "looks like an e-mail address",
        "looks like a credential",
    ]


def test_screen_of_nothing_is_nothing():
    assert screen([]) == []
    assert screen_text("", "") == []


def test_issues_are_the_shared_issue_type():
    (issue,) = screen([("", "ops@example.com")])

    assert isinstance(issue, Issue)
    assert issue.as_dict() == {
        "path": "",
        "code": "private_content",
        "message": "looks like an e-mail address",
    }
