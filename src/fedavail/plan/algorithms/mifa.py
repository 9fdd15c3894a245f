from fedavail.plan.algorithms.base import AlgorithmOptions, option, registered


@registered
class MIFAOptions(AlgorithmOptions):
    """MIFA (arXiv 2106.04159): the server averages every client's latest stored update."""

    MEMORY_AIDED = True

    init: str = option("zero", "zero: a client's stored update is 0 until it first takes part; wait: no server "
                       "update until every client has taken part once", choices=("zero", "wait"))
    normalize: str = option("lr", "lr: stored updates rescaled to the current learning rate; raw: kept as made",
                            choices=("lr", "raw"))

    def label(self) -> str:
        return "MIFA (memory aided)"
