"""The interface every algorithm implements: explicit tensor state and a few hooks the trainer calls each round.

State is a dict of tensors ([d] vectors, [m, d] tables, [m] scalars), so checkpoints and memory accounting are
generic. Algorithms never touch files, devices or data loading; they import the hooks' types from here."""

from dataclasses import dataclass

import torch

from fedavail.engine.local import LocalCorrection, LocalResult

State = dict[str, torch.Tensor]


@dataclass
class RoundContext:
    """What the trainer knows about round t before local training."""

    round: int
    available: torch.Tensor  # bool [m]: who is available this round (the trace)
    prob: torch.Tensor | None  # float [m]: p_i^t where the availability model defines it
    snapshot: torch.Tensor | None  # long [n]: the trace's pre-drawn uniform cohort for this round
    lr: float  # the local learning rate this round
    generator: torch.Generator  # keyed by (seed, "algorithm", round): the algorithm's own draws


class Algorithm:
    """FedAvg-shaped defaults: participants are the available clients, all start from the server model x. An
    algorithm class also inherits its options dataclass (fedavail.plan.algorithms), which holds its fields."""

    global_lr: float

    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        """The state before round 0; `client_sizes` [m] holds each client's number of training samples."""
        return {"x": x0.clone()}

    def select(self, state: State, ctx: RoundContext) -> torch.Tensor:
        return torch.nonzero(ctx.available).flatten()

    def start_points(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> torch.Tensor:
        return state["x"].expand(len(clients), -1)

    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection | None:
        return None

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        raise NotImplementedError

    def server_model(self, state: State) -> torch.Tensor:
        """The server model x: checked for divergence every round (the other eval_models on evaluated rounds)."""
        return state["x"]

    def eval_models(self, state: State) -> dict[str, torch.Tensor]:
        """The model vectors to evaluate on the rounds the schedule evaluates, by name; "global" is the server
        model, the one the tables report."""
        return {"global": self.server_model(state)}

    def round_metrics(self, state: State) -> dict[str, float]:
        """Extra metrics logged every round (e.g. FAST's snapshot flag and q)."""
        return {}

    def eval_metrics(self, state: State) -> dict[str, float]:
        """Extra metrics logged with each evaluation, on the rounds the schedule evaluates (e.g. FedSWE's consensus
        error, a pass over its [m, d] table)."""
        return {}


def local_work(algorithm: Algorithm, state: State,
               ctx: RoundContext) -> tuple[torch.Tensor, torch.Tensor, LocalCorrection | None]:
    """The round's participants, their start points and their correction: what local training needs."""
    clients = algorithm.select(state, ctx)
    return clients, algorithm.start_points(state, clients, ctx), algorithm.correction(state, clients, ctx)


def state_bytes(state: State) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())

