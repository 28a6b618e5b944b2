"""The OpenAPI document and the server cannot drift: schemathesis generates requests from
/api/openapi.json, valid and not, sends them to the live server, and checks every answer against
the document. Bounded, so it stays within a minute or two on a small machine.

Every check runs but one: positive data acceptance. The schemas describe shape only (SPEC §12); a
request of the right shape may still be refused by the rules (a source not on the list, a cursor
that was never issued), with the 4xx the document names for it.

Hypothesis drives each operation's strategy here rather than schemathesis' pytest plugin, whose
fixture loader does not run under pytest 9."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

EXAMPLES_PER_OPERATION = 50
SHAPE_ONLY = [schemathesis.checks.positive_data_acceptance]


def test_every_answer_conforms_to_the_openapi_document(live_url, raised_caps, make_agent, subtests):
    fuzzer = make_agent("fuzzer")
    schema = schemathesis.openapi.from_url(f"{live_url}/api/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 9

    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def conforms(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=fuzzer.headers, excluded_checks=SHAPE_ONLY)

        with subtests.test(operation=operation.label):
            conforms()
