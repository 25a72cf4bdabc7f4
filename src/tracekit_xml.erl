%% @private
%% @doc Text made safe for XML and HTML, the one escaping of the report's
%% page and the latency drawings: for element content and attribute
%% values, control characters other than tab and newline as U+FFFD.
-module(tracekit_xml).

-export([esc/1]).

%% @doc Text as XML character data.
-spec esc(unicode:chardata()) -> iolist().
esc(Text) ->
    [esc_char(C) || C <- unicode:characters_to_list(Text)].

esc_char($&) -> "&amp;";
esc_char($<) -> "&lt;";
esc_char($>) -> "&gt;";
esc_char($") -> "&quot;";
esc_char($') -> "&#39;";
esc_char(C) when C =:= $\t; C =:= $\n -> C;
esc_char(C) when C < 32; C =:= 16#FFFE; C =:= 16#FFFF; C >= 16#D800, C =< 16#DFFF -> 16#FFFD;
esc_char(C) -> C.
