%% @doc Test helper: an io device that keeps what is written to it, to
%% stand in for the shell.
-module(tk_capture).

-export([start/0, stop/1, text/1, lines/1, wait_for/3, clear/1]).

start() ->
    spawn(fun() -> loop([]) end).

stop(C) ->
    exit(C, kill).

%% Everything written so far.
text(C) ->
    C ! {'$text', self()},
    receive {'$text', C, T} -> T after 10000 -> error(capture_timeout) end.

%% Forgets what was written so far.
clear(C) ->
    C ! {'$clear', self()},
    receive {'$clear', C} -> ok after 10000 -> error(capture_timeout) end.

%% The complete lines written so far.
lines(C) ->
    [L || L <- string:split(text(C), "\n", all), L =/= ""].

%% Waits until a line matching the regular expression Re is written;
%% returns it.
wait_for(C, Re, Timeout) when Timeout > 0 ->
    case [L || L <- lines(C), re:run(L, Re) =/= nomatch] of
        [L | _] -> L;
        [] -> timer:sleep(10), wait_for(C, Re, Timeout - 10)
    end;
wait_for(C, Re, _) ->
    error({no_line, Re, lines(C)}).

loop(Acc) ->
    receive
        {io_request, From, ReplyAs, Req} ->
            {Reply, Acc1} = request(Req, Acc),
            From ! {io_reply, ReplyAs, Reply},
            loop(Acc1);
        {'$text', From} ->
            From ! {'$text', self(), unicode:characters_to_list(lists:reverse(Acc))},
            loop(Acc);
        {'$clear', From} ->
            From ! {'$clear', self()},
            loop([])
    end.

request({put_chars, _Enc, Chars}, Acc) ->
    {ok, [unicode:characters_to_list(Chars) | Acc]};
request({put_chars, _Enc, M, F, A}, Acc) ->
    request({put_chars, unicode, apply(M, F, A)}, Acc);
request({requests, Reqs}, Acc) ->
    lists:foldl(fun(R, {_, A}) -> request(R, A) end, {ok, Acc}, Reqs);
request(getopts, Acc) ->
    {[{binary, false}, {encoding, unicode}], Acc};
request({get_geometry, _}, Acc) ->
    {{error, enotsup}, Acc};
request(_, Acc) ->
    {{error, request}, Acc}.
