%% @doc The C core's models of the VM's tracing machinery, callable from
%% Erlang: seq_trace tokens and serials, trace sessions, breakpoints.
%%
%% These exist for the differential tests (the same scenario runs on the VM
%% and on the model, and both must agree) and for tools that reason about
%% trace data offline. Each model's functions are in their own section.
-module(tracekit_model).

-on_load(init/0).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%%% ---- seq_trace model ------------------------------------------------------

%%% ---- trace session model --------------------------------------------------

%%% ---- breakpoint model -----------------------------------------------------
