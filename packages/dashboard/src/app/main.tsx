import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { App } from './App.js';

render(<App />, document.getElementById('root')!);
