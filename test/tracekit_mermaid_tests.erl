-module(tracekit_mermaid_tests).

-include_lib("eunit/include/eunit.hrl").

text(Arrows, Opts) ->
    unicode:characters_to_list(tracekit_mermaid:sequence(Arrows, Opts)).

sequence_test() ->
    C = list_to_pid("<0.80.0>"), S = list_to_pid("<0.90.0>"),
    ?assertEqual("sequenceDiagram\n"
                 "    participant p1 as client\n"
                 "    participant p2 as #60;0.90.0#62; (server)\n"
                 "    p1->>p2: {get,k}\n"
                 "    p2->>p1: {reply,42}\n"
                 "    p2->>p2: tick\n",
                 text([{C, S, "{get,k}"}, {S, C, "{reply,42}"}, {S, S, "tick"}],
                      #{names => #{C => "client", S => "<0.90.0> (server)"}})).

%% Participants in order of first mention; unnamed ones printed with ~w.
participants_test() ->
    ?assertEqual("sequenceDiagram\n"
                 "    participant p1 as b\n"
                 "    participant p2 as a\n"
                 "    participant p3 as {x,1}\n"
                 "    p1->>p2: 1\n"
                 "    p2->>p3: 2\n"
                 "    p3->>p1: 3\n",
                 text([{b, a, "1"}, {a, {x, 1}, "2"}, {{x, 1}, b, "3"}], #{})).

escape_test() ->
    ?assertEqual("sequenceDiagram\n"
                 "    title a#59; b\n"
                 "    participant p1 as x\n"
                 "    participant p2 as y\n"
                 "    p1->>p2: #35;Ref#60;0.1.2#62; #59; two lines\n",
                 text([{x, y, "#Ref<0.1.2> ; two\nlines"}], #{title => "a; b"})).

label_length_test() ->
    [_, _, _, Arrow, ""] = string:split(text([{x, y, lists:duplicate(100, $a)}],
                                             #{label_length => 10}), "\n", all),
    ?assertEqual("    p1->>p2: aaaaaaa...", Arrow).

unicode_test() ->
    ?assertEqual("sequenceDiagram\n    participant p1 as å\n    participant p2 as y\n"
                 "    p1->>p2: ≥ 1\n",
                 text([{x, y, "≥ 1"}], #{names => #{x => "å"}})).

empty_test() ->
    ?assertEqual("sequenceDiagram\n", text([], #{})).
