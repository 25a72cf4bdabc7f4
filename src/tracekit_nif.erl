%% @doc Where tracekit's NIF libraries live.
%%
%% Every tracer module carries its own NIF library (the VM calls the
%% module's `enabled/3' and `trace/5', so those must be NIFs of that very
%% module). Each module loads it from its `-on_load' function with
%% `erlang:load_nif(tracekit_nif:path(?MODULE), 0)'.
-module(tracekit_nif).

-export([path/1, priv_dir/0]).

%% @doc The path (without extension) of the NIF library of `Module'.
-spec path(module()) -> file:filename().
path(Module) ->
    filename:join(priv_dir(), atom_to_list(Module)).

%% @doc The application's `priv' directory, also when the beams were put in
%% the code path by hand rather than as an application.
-spec priv_dir() -> file:filename().
priv_dir() ->
    case code:priv_dir(tracekit) of
        {error, bad_name} ->
            Ebin = filename:dirname(code:which(?MODULE)),
            filename:join(filename:dirname(Ebin), "priv");
        Dir ->
            Dir
    end.
