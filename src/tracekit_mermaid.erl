%% @doc Mermaid sequence diagrams of message flows.
%%
%% ```
%% 1> io:put_chars(tracekit_mermaid:sequence(
%%        [{C, S, "{get,k}"}, {S, C, "{reply,42}"}],
%%        #{names => #{C => "client", S => "<0.90.0> (server)"}})).
%% sequenceDiagram
%%     participant p1 as client
%%     participant p2 as #60;0.90.0#62; (server)
%%     p1->>p2: {get,k}
%%     p2->>p1: {reply,42}
%% '''
%%
%% The input is neutral: an arrow is `{From, To, Label}' where `From' and
%% `To' are any terms naming participants (pids, atoms, ...) and `Label' is
%% text. Participants appear in the order they are first mentioned. Text is
%% escaped for Mermaid (`#', `;', `<', `>' become entity codes, line breaks
%% become spaces) and labels are cut to a length.
-module(tracekit_mermaid).

-export([sequence/1, sequence/2]).

-export_type([arrow/0, opts/0]).

-type arrow() :: {From :: term(), To :: term(), Label :: unicode:chardata()}.
%% `names': the text shown for a participant (default: the term printed
%% with `~w'); `title': a title line; `label_length': the longest label in
%% characters (default 80).
-type opts() :: #{names => #{term() => unicode:chardata()},
                  title => unicode:chardata(),
                  label_length => pos_integer()}.

%% @equiv sequence(Arrows, #{})
-spec sequence([arrow()]) -> unicode:chardata().
sequence(Arrows) ->
    sequence(Arrows, #{}).

%% @doc The Mermaid text of a sequence diagram with one arrow per element
%% of `Arrows', in order.
-spec sequence([arrow()], opts()) -> unicode:chardata().
sequence(Arrows, Opts) ->
    Names = maps:get(names, Opts, #{}),
    Max = maps:get(label_length, Opts, 80),
    Ids = ids(Arrows),
    Order = lists:keysort(2, maps:to_list(Ids)),
    Title = case Opts of
                #{title := T} -> ["    title ", escape(T, 200), "\n"];
                _ -> []
            end,
    ["sequenceDiagram\n", Title,
     [["    participant ", id(N), " as ", escape(name(P, Names), 200), "\n"]
      || {P, N} <- Order],
     [["    ", id(maps:get(F, Ids)), "->>", id(maps:get(T, Ids)), ": ",
       escape(L, Max), "\n"] || {F, T, L} <- Arrows]].

ids(Arrows) ->
    lists:foldl(fun({F, T, _}, Acc) -> add(T, add(F, Acc)) end, #{}, Arrows).

add(P, Acc) when is_map_key(P, Acc) -> Acc;
add(P, Acc) -> Acc#{P => map_size(Acc) + 1}.

id(N) -> [$p | integer_to_list(N)].

name(P, Names) ->
    case Names of
        #{P := Text} -> Text;
        _ -> io_lib:format("~tw", [P])
    end.

escape(Text, Max) ->
    Chars = unicode:characters_to_list(Text),
    Short = case string:length(Chars) > Max of
                true -> unicode:characters_to_list(string:slice(Chars, 0, Max - 3)) ++ "...";
                false -> Chars
            end,
    [esc(C) || C <- Short].

esc($#) -> "#35;";
esc($;) -> "#59;";
esc($<) -> "#60;";
esc($>) -> "#62;";
esc($\n) -> " ";
esc($\r) -> " ";
esc(C) -> C.
