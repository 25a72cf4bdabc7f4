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
%% The input is neutral: an item is an arrow `{From, To, Label}' where
%% `From' and `To' are any terms naming participants (pids, atoms, ...)
%% and `Label' is text; `{From, To, Label, lost}', a message that never
%% arrived (drawn ending in a cross); or `{note, Who, Text}'. Participants
%% appear in the order they are first mentioned. Text is escaped for
%% Mermaid (`#', `;', `<', `>', `"' become entity codes, line breaks become
%% spaces) and labels are cut to a length.
-module(tracekit_mermaid).

-export([sequence/1, sequence/2]).

-export_type([arrow/0, opts/0]).

-type arrow() :: {From :: term(), To :: term(), Label :: unicode:chardata()}
               | {From :: term(), To :: term(), Label :: unicode:chardata(), lost}
               | {note, Who :: term(), Text :: unicode:chardata()}.
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

%% @doc The Mermaid text of a sequence diagram with one arrow (or note) per
%% element of `Arrows', in order.
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
     [item(A, Ids, Max) || A <- Arrows]].

item({note, W, Text}, Ids, Max) ->
    ["    Note over ", id(maps:get(W, Ids)), ": ", escape(Text, Max), "\n"];
item({F, T, L}, Ids, Max) ->
    ["    ", id(maps:get(F, Ids)), "->>", id(maps:get(T, Ids)), ": ",
     escape(L, Max), "\n"];
item({F, T, L, lost}, Ids, Max) ->
    ["    ", id(maps:get(F, Ids)), "-x", id(maps:get(T, Ids)), ": ",
     escape(L, Max), "\n"].

ids(Arrows) ->
    lists:foldl(fun({note, W, _}, Acc) -> add(W, Acc);
                   ({F, T, _}, Acc) -> add(T, add(F, Acc));
                   ({F, T, _, lost}, Acc) -> add(T, add(F, Acc))
                end, #{}, Arrows).

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
esc($") -> "#34;";
esc($\n) -> " ";
esc($\r) -> " ";
esc(C) -> C.
